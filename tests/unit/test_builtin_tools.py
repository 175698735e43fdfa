"""The built-in tools: `calculator` and `current_time`."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

import pytest

from core.errors import ToolError
from core.tools import (
    SafetyTier,
    ToolContext,
    ToolRegistry,
    builtin_tools,
    calculator_tool,
    current_time_tool,
)
from core.tools.calculator import MAX_INT_DIGITS, evaluate, format_number


def _context(now: datetime = datetime(2026, 11, 22, 2, 4, 5, tzinfo=UTC)) -> ToolContext:
    return ToolContext(session_id="s1", clock=lambda: now)


# --- calculator: values -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("17*23", 391),
        ("2+3*4", 14),
        ("(2+3)*4", 20),
        ("10-4-3", 3),
        ("2**10", 1024),
        ("2^10", 1024),
        ("2^3^2", 512),  # right-associative, as in mathematics
        ("-2**2", -4),
        ("-3+5", 2),
        ("+7", 7),
        ("--4", 4),
        ("7//2", 3),
        ("-7//2", -4),
        ("7%3", 1),
        ("10/4", 2.5),
        ("2**-2", 0.25),
        ("12×3÷4", 9),  # noqa: RUF001 - the multiplication sign is the point
        ("−5+1", -4),  # noqa: RUF001 - the minus sign is the point
        ("1_000 + 0x10", 1016),
        ("2**1000", 2**1000),
        ("abs(-7)", 7),
        ("round(2.567, 2)", 2.57),
        ("round(2.5)", 2),
        ("min(4, 2, 8)", 2),
        ("max(4, 2, 8)", 8),
        ("floor(-2.5)", -3),
        ("ceil(2.1)", 3),
        ("log10(1000)", 3),
        ("log(8, 2)", 3),
        ("exp(0)", 1),
        ("cos(0)", 1),
    ],
)
def test_evaluate_computes_arithmetic(expression: str, expected: float) -> None:
    assert evaluate(expression) == pytest.approx(expected)


def test_integer_arithmetic_is_exact() -> None:
    assert evaluate("2**100 + 1") == 2**100 + 1
    assert isinstance(evaluate("6*7"), int)


def test_functions_and_constants() -> None:
    assert evaluate("sqrt(2)") == pytest.approx(math.sqrt(2))
    assert evaluate("pi") == math.pi
    assert evaluate("e") == math.e
    assert evaluate("log(e)") == pytest.approx(1)
    assert evaluate("sin(pi/2)") == pytest.approx(1)
    assert evaluate("tan(0)") == 0


@pytest.mark.parametrize(
    ("expression", "shown"),
    [
        ("17*23", "391"),
        ("0.1+0.2", "0.3"),
        ("10/4", "2.5"),
        ("6/3", "2"),
        ("1/3", "0.333333333333"),
        ("2**0.5 * 2**0.5", "2"),
        ("-0.0", "0"),
        ("1e-7", "1e-7"),
        ("1e6*1e6", "1e12"),
        ("-1/8", "-0.125"),
        ("2**64", "18446744073709551616"),
    ],
)
def test_format_number(expression: str, shown: str) -> None:
    assert format_number(evaluate(expression)) == shown


# --- calculator: refusals -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "Empty expression"),
        ("   ", "Empty expression"),
        ("1/0", "Division by zero in '1/0'"),
        ("5 // 0", "Division by zero"),
        ("5 % 0", "Division by zero"),
        ("0**-1", "Division by zero"),
        ("2 +", "Syntax error in '2 +'"),
        ("(1", "Syntax error"),
        ("x + 1", "Unknown name 'x'"),
        ("sqrt", "sqrt is a function"),
        ("__import__('os')", "Unknown function '__import__'"),
        ("open('/etc/passwd')", "Unknown function 'open'"),
        ("().__class__", "Attribute access not allowed"),
        ("a.b", "Attribute access not allowed"),
        ("math.pi", "Attribute access not allowed"),
        ("(lambda: 1)()", "Only these functions can be called"),
        ("lambda: 1", "Lambda not allowed"),
        ("[1, 2][0]", "Indexing not allowed"),
        ("(1, 2)", "Tuples not allowed"),
        ("1 < 2", "Comparisons not allowed"),
        ("1 and 2", "And/or not allowed"),
        ("'a' * 3", "Only numbers are allowed"),
        ("True + 1", "Only numbers are allowed"),
        ("1j", "Only numbers are allowed"),
        ("1 << 2", "Operator '<<' is not supported"),
        ("~1", "Operator '~' is not supported"),
        ("sqrt(x=4)", "positional arguments only"),
        ("sqrt(1, 2)", "sqrt() does not take 2 argument(s)"),
        ("min()", "min() does not take 0 argument(s)"),
        ("sqrt(-1)", "Math error in 'sqrt(-1)'"),
        ("log(0)", "Math error"),
        ("(-8)**(1/3)", "not a real number"),
        ("round(1.5, 0.5)", "whole number of digits"),
    ],
)
def test_evaluate_refuses_with_a_helpful_message(expression: str, message: str) -> None:
    with pytest.raises(ToolError, match=re.escape(message)):
        evaluate(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9**9**9", "Exponent too large"),
        ("2**10**6", "Exponent too large"),
        ("10**1000", f"more than {MAX_INT_DIGITS} digits"),
        ("(10**999) * 10", f"more than {MAX_INT_DIGITS} digits"),
        ("99**999", f"more than {MAX_INT_DIGITS} digits"),
        ("round(5, -10**9)", "round() digits must be between"),
        ("1e308 * 10", "too large for a floating-point number"),
        ("1.5e400", "too large for a floating-point number"),
        ("exp(1000)", "Result too large"),
        ("(10**999) ** 0.5", "Result too large"),
        ("10**999 / 3", "Result too large"),
    ],
)
def test_huge_results_are_refused_before_they_are_computed(expression: str, message: str) -> None:
    # Each message is the guard's, raised before the work (a result computed first would take
    # minutes and hit the test's timeout).
    with pytest.raises(ToolError, match=re.escape(message)):
        evaluate(expression)


def test_largest_allowed_integer_is_computed() -> None:
    assert len(str(evaluate("10**999"))) == MAX_INT_DIGITS


def test_expression_size_is_bounded() -> None:
    with pytest.raises(ToolError, match="too long"):
        evaluate("1+" * 300 + "1")
    with pytest.raises(ToolError, match="too complex"):
        evaluate("1+" * 200 + "1")
    with pytest.raises(ToolError, match="too complex"):
        evaluate("-" * 400 + "1")
    with pytest.raises(ToolError, match="Syntax error"):
        evaluate("(" * 220 + "1" + ")" * 220)


# --- calculator: the tool -----------------------------------------------------------------


async def test_calculator_tool_answers_expression_equals_result() -> None:
    tool = calculator_tool()
    assert await tool({"expression": "17*23"}, _context()) == "17*23 = 391"
    assert await tool({"expression": " 2^10 "}, _context()) == "2^10 = 1024"
    assert await tool({"expression": "0.1+0.2"}, _context()) == "0.1+0.2 = 0.3"


async def test_calculator_tool_passes_evaluation_errors_to_the_model() -> None:
    with pytest.raises(ToolError, match=r"Division by zero in '1/0'"):
        await calculator_tool()({"expression": "1/0"}, _context())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "expression: Field required"),
        ({"expression": 17}, "expression: Input should be a valid string"),
        ({"expression": ""}, "expression: String should have at least 1 character"),
        ({"expression": "1" * 501}, "expression: String should have at most 500 characters"),
    ],
)
def test_calculator_arguments_are_validated(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ToolError, match=r"^Invalid arguments for calculator: .*" + message):
        calculator_tool().parse(arguments)


def test_calculator_spec() -> None:
    tool = calculator_tool()
    parameters = tool.spec.parameters
    assert tool.name == tool.spec.name == "calculator"
    assert tool.tier is SafetyTier.READ_ONLY
    assert parameters["type"] == "object"
    assert set(parameters["properties"]) == {"expression"}
    expression = parameters["properties"]["expression"]
    assert expression["type"] == "string"
    assert expression["maxLength"] == 500
    assert "sqrt" in expression["description"]
    assert parameters["required"] == ["expression"]


# --- current_time -------------------------------------------------------------------------


async def test_current_time_defaults_to_utc() -> None:
    answer = await current_time_tool()({}, _context())
    assert answer == "2026-11-22 02:04:05 UTC (UTC+00:00, UTC), Sunday 22 November 2026"
    assert await current_time_tool()({"timezone": None}, _context()) == answer
    assert await current_time_tool()({"timezone": ""}, _context()) == answer


async def test_current_time_in_a_named_zone() -> None:
    answer = await current_time_tool()({"timezone": "Europe/Paris"}, _context())
    assert answer == ("2026-11-22 03:04:05 CET (UTC+01:00, Europe/Paris), Sunday 22 November 2026")


async def test_current_time_follows_daylight_saving_changes() -> None:
    tool = current_time_tool()
    before = _context(datetime(2026, 3, 29, 0, 30, tzinfo=UTC))
    after = _context(datetime(2026, 3, 29, 1, 30, tzinfo=UTC))
    assert await tool({"timezone": "Europe/London"}, before) == (
        "2026-03-29 00:30:00 GMT (UTC+00:00, Europe/London), Sunday 29 March 2026"
    )
    assert await tool({"timezone": "Europe/London"}, after) == (
        "2026-03-29 02:30:00 BST (UTC+01:00, Europe/London), Sunday 29 March 2026"
    )


async def test_current_time_shows_odd_offsets_and_the_local_date() -> None:
    tool = current_time_tool()
    kathmandu = await tool({"timezone": "Asia/Kathmandu"}, _context())
    assert "07:49:05" in kathmandu
    assert "(UTC+05:45, Asia/Kathmandu)" in kathmandu
    new_york = await tool({"timezone": "America/New_York"}, _context())
    assert new_york == (
        "2026-11-21 21:04:05 EST (UTC-05:00, America/New_York), Saturday 21 November 2026"
    )


@pytest.mark.parametrize(
    "zone",
    ["Mars/Olympus", "europe/paris", "../etc", "/etc/passwd", "Europe", "zone.tab", "leapseconds"],
)
async def test_current_time_rejects_unknown_zones(zone: str) -> None:
    expected = f"Unknown timezone '{zone}'; use an IANA name such as Europe/Paris."
    with pytest.raises(ToolError) as caught:
        await current_time_tool()({"timezone": zone}, _context())
    assert str(caught.value) == expected


async def test_current_time_rejects_overlong_zone_names() -> None:
    with pytest.raises(ToolError, match="timezone: String should have at most 64 characters"):
        await current_time_tool()({"timezone": "A" * 65}, _context())


async def test_current_time_rejects_a_naive_clock() -> None:
    naive = ToolContext(session_id="s1", clock=lambda: datetime(2026, 1, 1))  # noqa: DTZ001
    with pytest.raises(ValueError, match="naive"):
        await current_time_tool()({}, naive)


def test_current_time_spec() -> None:
    tool = current_time_tool()
    parameters = tool.spec.parameters
    assert tool.name == tool.spec.name == "current_time"
    assert tool.tier is SafetyTier.READ_ONLY
    assert parameters["type"] == "object"
    assert set(parameters["properties"]) == {"timezone"}
    assert "Europe/Paris" in parameters["properties"]["timezone"]["description"]
    assert "UTC" in parameters["properties"]["timezone"]["description"]
    assert parameters.get("required", []) == []


# --- builtin_tools ------------------------------------------------------------------------


def test_builtin_tools_are_fresh_and_registrable() -> None:
    first, second = builtin_tools(), builtin_tools()
    assert [tool.name for tool in first] == ["calculator", "current_time"]
    assert all(a is not b for a, b in zip(first, second, strict=True))
    assert ToolRegistry(first).names() == ["calculator", "current_time"]
