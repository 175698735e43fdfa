"""Files for a chat: the `file` Outbound on the bus, `send_file`, the platform limits and the
note that stands in for a file that did not go up, the terminal and the web page."""

from __future__ import annotations

import base64
import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from rich.console import Console

from bots.platforms import REGISTERED
from channels.terminal import TerminalAdapter
from channels.uploads import UploadLimits, upload_each
from channels.web.server import _shown
from core.bus.names import outbound_queue
from core.envelopes import MAX_ATTACHMENT_BYTES, Address, Attachment, Outbound, decode, encode
from core.errors import ChannelError, ToolError
from core.modes import FULL, SAFE_CHAT
from core.tools import FileDrop, ToolContext, send_file_tool
from core.tools.base import SafetyTier
from core.tools.workspace import WorkspaceSettings
from tests.backends.memory_bus import MemoryBus

CHAT = Address(platform="telegram", bot="b", chat="42")
ADMIN = ToolContext(
    session_id="s1", run_id="r1", user_id="7", platform="telegram", address=CHAT, is_admin=True
)
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 20


@pytest.fixture
async def bus() -> AsyncIterator[MemoryBus]:
    opened = MemoryBus()
    try:
        yield opened
    finally:
        await opened.close()


async def taken(bus: MemoryBus, platform: str = "telegram") -> Outbound:
    delivery = await bus.receive(outbound_queue(platform), consumer="test", timeout=0)
    assert delivery is not None, "nothing was queued"
    await delivery.ack()
    assert isinstance(delivery.envelope, Outbound)
    return delivery.envelope


# --- the envelope --------------------------------------------------------------------------


def test_a_file_outbound_crosses_the_bus_with_its_bytes_intact() -> None:
    picture = Attachment(name="a.png", media_type="image/png", data=PNG, image=True)
    outbound = Outbound(kind="file", address=CHAT, text="caption", attachments=[picture])

    back = decode(encode(outbound))

    assert isinstance(back, Outbound)
    assert back.attachments == [picture]
    assert back.attachments[0].data == PNG
    assert not back.ends_turn


def test_a_file_outbound_shows_as_json_with_its_bytes_in_base64() -> None:
    picture = Attachment(name="a.png", media_type="image/png", data=PNG, image=True)
    outbound = Outbound(kind="file", address=CHAT, attachments=[picture])

    shown = outbound.model_dump(mode="json")  # as `switchboard deadletters show` prints it

    assert shown["attachments"][0]["data"] == base64.b64encode(PNG).decode()
    assert Outbound.model_validate_json(outbound.model_dump_json()) == outbound


def test_attachments_past_the_cap_are_refused_when_the_envelope_is_built() -> None:
    big = Attachment(name="big.bin", data=b"\0" * (MAX_ATTACHMENT_BYTES + 1))
    with pytest.raises(ValidationError, match="over the"):
        Outbound(kind="file", address=CHAT, attachments=[big])


# --- FileDrop and send_file ----------------------------------------------------------------


async def test_a_dropped_file_is_queued_once_per_run_for_the_turns_chat(bus: MemoryBus) -> None:
    drop = FileDrop(bus)
    notes = Attachment(name="notes.txt", media_type="text/plain", data=b"hello")

    await drop.send(ADMIN, notes, caption="here")
    await drop.send(ADMIN, notes, caption="here")  # the same run repeating itself

    outbound = await taken(bus)
    assert (outbound.kind, outbound.address, outbound.text) == ("file", CHAT, "here")
    assert outbound.attachments == [notes]
    assert await bus.receive(outbound_queue("telegram"), consumer="test", timeout=0) is None


async def test_a_turn_without_a_chat_cannot_drop_a_file(bus: MemoryBus) -> None:
    context = ADMIN.model_copy(update={"address": None})
    with pytest.raises(ToolError, match="no chat"):
        await FileDrop(bus).send(context, Attachment(name="a.txt", data=b"x"))


def workspace(tmp_path: Path) -> WorkspaceSettings:
    root = tmp_path / "ws"
    (root / "out").mkdir(parents=True)
    (root / "out" / "report.pdf").write_bytes(b"%PDF-1.4 tiny")
    (root / "empty.txt").write_bytes(b"")
    (tmp_path / "secret.txt").write_text("key")
    (root / "link.txt").symlink_to(tmp_path / "secret.txt")
    return WorkspaceSettings(root=root)


async def test_send_file_queues_a_workspace_file_as_a_document(
    bus: MemoryBus, tmp_path: Path
) -> None:
    tool = send_file_tool(workspace(tmp_path), FileDrop(bus))

    result = await tool({"path": "out/report.pdf", "caption": "Q3"}, ADMIN)

    assert "Sent report.pdf (13 bytes, application/pdf)" in result
    outbound = await taken(bus)
    (file,) = outbound.attachments
    assert (file.name, file.media_type, file.data, file.image) == (
        "report.pdf",
        "application/pdf",
        b"%PDF-1.4 tiny",
        False,
    )
    assert outbound.text == "Q3"


@pytest.mark.parametrize(
    ("path", "refusal"),
    [
        ("../secret.txt", "uses '..'"),
        ("/etc/passwd", "absolute"),
        ("link.txt", "outside the workspace"),
        ("missing.pdf", "No file"),
        ("empty.txt", "empty"),
    ],
)
async def test_send_file_refuses_what_is_not_a_file_of_the_workspace(
    bus: MemoryBus, tmp_path: Path, path: str, refusal: str
) -> None:
    tool = send_file_tool(workspace(tmp_path), FileDrop(bus))
    with pytest.raises(ToolError, match=refusal):
        await tool({"path": path}, ADMIN)
    assert await bus.receive(outbound_queue("telegram"), consumer="test", timeout=0) is None


async def test_send_file_is_privileged_and_refuses_anyone_but_an_admin(
    bus: MemoryBus, tmp_path: Path
) -> None:
    tool = send_file_tool(workspace(tmp_path), FileDrop(bus))
    assert tool.tier is SafetyTier.PRIVILEGED
    assert FULL.allows(tool)
    assert not SAFE_CHAT.allows(tool)
    with pytest.raises(ToolError, match="Only an admin"):
        await tool({"path": "out/report.pdf"}, ADMIN.model_copy(update={"is_admin": False}))


# --- limits and notes ----------------------------------------------------------------------


def test_each_platform_spec_names_its_upload_limits() -> None:
    assert REGISTERED.get("telegram").uploads == UploadLimits(50_000_000, 10_000_000)
    assert REGISTERED.get("discord").uploads.file_bytes == 10 * 1024 * 1024
    assert REGISTERED.get("slack").uploads.file_bytes >= MAX_ATTACHMENT_BYTES


def test_a_picture_over_the_picture_limit_goes_as_a_file() -> None:
    limits = UploadLimits(file_bytes=100, image_bytes=10)
    small = Attachment(name="a.png", data=b"x" * 10, image=True)
    large = Attachment(name="b.png", data=b"x" * 11, image=True)
    document = Attachment(name="c.pdf", data=b"x")
    assert [limits.as_picture(a) for a in (small, large, document)] == [True, False, False]
    assert limits.refusal(Attachment(name="d", data=b"x" * 101)) is not None


class _Chat:
    """What `upload_each` did: uploads made and notes posted."""

    def __init__(self, failure: ChannelError | None = None) -> None:
        self.uploaded: list[tuple[str, str]] = []
        self.notes: list[str] = []
        self.failure = failure

    async def upload(self, attachment: Attachment, caption: str) -> None:
        if self.failure is not None:
            raise self.failure
        self.uploaded.append((attachment.name, caption))

    async def note(self, line: str) -> None:
        self.notes.append(line)


def _outbound(*files: Attachment, text: str = "") -> Outbound:
    return Outbound(kind="file", address=CHAT, text=text, attachments=list(files))


async def test_files_go_up_with_the_caption_on_the_first_and_a_too_large_one_is_noted() -> None:
    chat = _Chat()
    files = [
        Attachment(name="a.txt", data=b"x"),
        Attachment(name="big.bin", data=b"x" * 200),
        Attachment(name="c.txt", data=b"x"),
    ]
    await upload_each(
        _outbound(*files, text="all three"), UploadLimits(100), chat.upload, chat.note
    )
    assert chat.uploaded == [("a.txt", "all three"), ("c.txt", "")]
    assert chat.notes == [
        "⚠️ Could not send the file big.bin (200 bytes): it is 200 bytes and this platform "
        "takes at most 100 bytes."
    ]


async def test_a_refused_upload_is_noted_and_a_rate_limit_is_left_to_the_gateway() -> None:
    refused = _Chat(ChannelError("bad request", permanent=True))
    await upload_each(
        _outbound(Attachment(name="a.txt", data=b"x")), UploadLimits(), refused.upload, refused.note
    )
    assert refused.notes == ["⚠️ Could not send the file a.txt (1 byte): the platform refused it."]

    limited = _Chat(ChannelError("slow down", retry_after=2.0))
    with pytest.raises(ChannelError, match="slow down"):
        await upload_each(
            _outbound(Attachment(name="a.txt", data=b"x")),
            UploadLimits(),
            limited.upload,
            limited.note,
        )
    assert limited.notes == []


# --- the terminal and the web page ---------------------------------------------------------


async def test_the_terminal_saves_each_file_and_names_where(tmp_path: Path) -> None:
    printed = io.StringIO()
    adapter = TerminalAdapter(
        chat="c",
        interactive=False,
        stdin=io.StringIO(""),
        console=Console(file=printed, highlight=False, width=400),
        menu=(),
        files_dir=tmp_path / "files",
    )
    address = Address(platform="terminal", bot="local", chat="c")
    notes = Attachment(name="notes.txt", data=b"one")
    for _ in range(2):  # the second does not overwrite the first
        await adapter.deliver(Outbound(kind="file", address=address, attachments=[notes]))

    saved = sorted(p.name for p in (tmp_path / "files").iterdir())
    assert saved == ["notes-1.txt", "notes.txt"]
    assert (
        f"notes.txt saved to {(tmp_path / 'files' / 'notes.txt').resolve()}" in printed.getvalue()
    )


def test_the_web_page_gets_a_download_link_per_file() -> None:
    address = Address(platform="web", bot="local", chat="c")
    shown: dict[str, Any] = _shown(
        Outbound(kind="file", address=address, attachments=[Attachment(name="a.txt", data=b"hi")])
    )
    assert shown["kind"] == "file"
    assert shown["files"] == [
        {"name": "a.txt", "size": "2 bytes", "href": "data:application/octet-stream;base64,aGk="}
    ]
