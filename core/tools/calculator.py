"""The `calculator` tool: arithmetic on a parsed expression, never on `eval`.

The expression is parsed with `ast` and walked over a small whitelist of node kinds: number
literals, `+ - * / // % **`, unary `+ -`, calls to a few `math` functions and the constants
`pi` and `e`. For the convenience of people and models, `^` means power (as in most calculators,
not Python's XOR), and the multiplication sign, division sign and minus sign (U+00D7, U+00F7,
U+2212) mean `*`, `/` and `-`.

Sizes are bounded so no input can make the evaluation slow or huge: the expression's length and
node count, the magnitude of any exponent, and the number of digits of any integer result.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, Field

from core.errors import ToolError
from core.tools.base import SafetyTier, Tool, ToolContext

__all__ = [
    "MAX_EXPONENT",
    "MAX_EXPRESSION_LENGTH",
    "MAX_INT_DIGITS",
    "MAX_NODES",
    "CalculatorArgs",
    "calculator_tool",
    "evaluate",
    "format_number",
]

MAX_EXPRESSION_LENGTH = 500
MAX_NODES = 250
MAX_EXPONENT = 1000
MAX_INT_DIGITS = 1000
SIGNIFICANT_DIGITS = 12

Number = int | float

_INT_LIMIT = 10**MAX_INT_DIGITS
_SYMBOLS = {"^": "**", "×": "*", "÷": "/", "−": "-"}  # noqa: RUF001 - these are the point
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


class CalculatorArgs(BaseModel):
    """Arguments of the `calculator` tool."""

    expression: str = Field(
        min_length=1,
        max_length=MAX_EXPRESSION_LENGTH,
        description=(
            "An arithmetic expression such as '17*23', '(2+3)^2/7' or 'sqrt(2)*pi'. "
            "Operators: + - * / // % ** (or ^); functions: sqrt, abs, round, min, max, floor, "
            "ceil, log, log10, exp, sin, cos, tan (radians); constants: pi, e."
        ),
    )


@dataclass(frozen=True)
class _Function:
    call: Callable[..., Number]
    min_args: int
    max_args: int | None  # None: any number


def _round(value: Number, ndigits: Number | None = None) -> Number:
    if ndigits is None:
        return round(value)
    if not isinstance(ndigits, int):
        raise ToolError("round() takes a whole number of digits, e.g. round(3.14159, 2).")
    # int.__round__ computes 10**-ndigits, so an unbounded ndigits would hang.
    if abs(ndigits) > MAX_EXPONENT:
        raise ToolError(f"round() digits must be between -{MAX_EXPONENT} and {MAX_EXPONENT}.")
    return round(value, ndigits)


def _min(*values: Number) -> Number:
    return min(values)


def _max(*values: Number) -> Number:
    return max(values)


_FUNCTIONS: dict[str, _Function] = {
    "sqrt": _Function(math.sqrt, 1, 1),
    "abs": _Function(abs, 1, 1),
    "round": _Function(_round, 1, 2),
    "min": _Function(_min, 1, None),
    "max": _Function(_max, 1, None),
    "floor": _Function(math.floor, 1, 1),
    "ceil": _Function(math.ceil, 1, 1),
    "log": _Function(math.log, 1, 2),
    "log10": _Function(math.log10, 1, 1),
    "exp": _Function(math.exp, 1, 1),
    "sin": _Function(math.sin, 1, 1),
    "cos": _Function(math.cos, 1, 1),
    "tan": _Function(math.tan, 1, 1),
}

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}

# Friendly names for constructs a model might try; anything else is named by its class.
_CONSTRUCTS: dict[type[ast.AST], str] = {
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.Lambda: "lambda",
    ast.Compare: "comparisons",
    ast.BoolOp: "and/or",
    ast.IfExp: "if/else",
    ast.Tuple: "tuples",
    ast.List: "lists",
    ast.Set: "sets",
    ast.Dict: "dicts",
    ast.NamedExpr: "assignment",
    ast.JoinedStr: "strings",
    ast.ListComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.Starred: "* unpacking",
}

_OPERATOR_SYMBOLS: dict[type[ast.AST], str] = {
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Invert: "~",
    ast.Not: "not",
}


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; raises `ToolError` saying what is wrong."""
    text = expression.strip()
    if not text:
        raise ToolError("Empty expression; give an arithmetic expression such as '17*23'.")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ToolError(f"Expression too long (more than {MAX_EXPRESSION_LENGTH} characters).")
    for symbol, replacement in _SYMBOLS.items():
        text = text.replace(symbol, replacement)
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ToolError(f"Syntax error in {expression!r}.") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise ToolError(f"Expression too complex (more than {MAX_NODES} parts).")
    try:
        return _Evaluator(expression).visit(tree.body)
    except ZeroDivisionError:
        raise ToolError(f"Division by zero in {expression!r}.") from None
    except OverflowError:
        raise ToolError(f"Result too large in {expression!r}.") from None
    except (ValueError, TypeError) as exc:
        # math.sqrt(-1), math.log(0) and friends: a domain error the model can understand.
        raise ToolError(f"Math error in {expression!r}: {exc}.") from None


def format_number(value: Number) -> str:
    """Integers exactly; floats to 12 significant digits, trimmed, integral ones without '.0'."""
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"  # also for -0.0
    text = f"{value:.{SIGNIFICANT_DIGITS}g}"
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent)}" if exponent else mantissa


class _Evaluator:
    """Walks a parsed expression, allowing only whitelisted nodes."""

    def __init__(self, expression: str) -> None:
        self._expression = expression

    def visit(self, node: ast.expr) -> Number:
        match node:
            case ast.Constant(value=value):
                return self._literal(value)
            case ast.Name(id=name):
                return self._name(name)
            case ast.UnaryOp(op=ast.USub(), operand=operand):
                return _checked(-self.visit(operand))
            case ast.UnaryOp(op=ast.UAdd(), operand=operand):
                return self.visit(operand)
            case ast.BinOp(left=left, op=ast.Pow(), right=right):
                return _power(self.visit(left), self.visit(right))
            case ast.BinOp(left=left, op=op, right=right) if type(op) in _BINARY:
                return _checked(_BINARY[type(op)](self.visit(left), self.visit(right)))
            case ast.BinOp(op=op) | ast.UnaryOp(op=op):
                symbol = _OPERATOR_SYMBOLS.get(type(op), type(op).__name__)
                raise ToolError(f"Operator '{symbol}' is not supported in {self._expression!r}.")
            case ast.Call():
                return self._call(node)
            case _:
                construct = _CONSTRUCTS.get(type(node), type(node).__name__)
                raise ToolError(
                    f"{construct.capitalize()} not allowed in {self._expression!r}; "
                    "use numbers, + - * / // % ^, and the listed functions."
                )

    def _literal(self, value: object) -> Number:
        # bool is an int subclass and complex is a number; neither belongs in a calculator.
        if type(value) is int or type(value) is float:
            return _checked(value)
        raise ToolError(f"Only numbers are allowed, not {value!r}, in {self._expression!r}.")

    def _name(self, name: str) -> Number:
        if name in _CONSTANTS:
            return _CONSTANTS[name]
        if name in _FUNCTIONS:
            raise ToolError(f"{name} is a function; call it like {name}(2).")
        raise ToolError(
            f"Unknown name {name!r} in {self._expression!r}; the constants are pi and e."
        )

    def _call(self, node: ast.Call) -> Number:
        if not isinstance(node.func, ast.Name):
            raise ToolError(
                f"Only these functions can be called: {', '.join(_FUNCTIONS)}; "
                f"not in {self._expression!r}."
            )
        name = node.func.id
        function = _FUNCTIONS.get(name)
        if function is None:
            raise ToolError(f"Unknown function {name!r}; available: {', '.join(_FUNCTIONS)}.")
        if node.keywords:
            raise ToolError(f"{name}() takes positional arguments only.")
        count = len(node.args)
        if count < function.min_args or (
            function.max_args is not None and count > function.max_args
        ):
            raise ToolError(f"{name}() does not take {count} argument(s).")
        return _checked(function.call(*(self.visit(arg) for arg in node.args)))


def _power(base: Number, exponent: Number) -> Number:
    if abs(exponent) > MAX_EXPONENT:
        raise ToolError(f"Exponent too large (limit {MAX_EXPONENT}).")
    # Estimate the size first so a huge integer power is refused without being computed.
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent * math.log10(abs(base)) > MAX_INT_DIGITS + 1:
            raise ToolError(f"Result too large (more than {MAX_INT_DIGITS} digits).")
    return _checked(base**exponent)


def _checked(value: object) -> Number:
    if isinstance(value, complex):
        raise ToolError("Result is not a real number (e.g. a fractional power of a negative).")
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) >= _INT_LIMIT:
            raise ToolError(f"Result too large (more than {MAX_INT_DIGITS} digits).")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ToolError("Result too large for a floating-point number.")
        return value
    raise ToolError("Result is not a number.")


def calculator_tool() -> Tool[CalculatorArgs]:
    """A fresh `calculator` tool: exact integer arithmetic and 12-digit floats."""
    return Tool(
        name="calculator",
        description=(
            "Evaluate an arithmetic expression exactly and return 'expression = result'. "
            "Use it for any arithmetic rather than computing in your head."
        ),
        args=CalculatorArgs,
        tier=SafetyTier.READ_ONLY,
        run=_run_calculator,
    )


async def _run_calculator(args: CalculatorArgs, context: ToolContext) -> str:
    # Evaluation is bounded to milliseconds by the size limits, so it runs on the loop.
    expression = args.expression.strip()
    return f"{expression} = {format_number(evaluate(expression))}"
