"""Files back to a Slack conversation: a `file` Outbound through the gateway goes up Slack's
external way (slack_sdk's `files_upload_v2`: `files.getUploadURLExternal`, the bytes to the
upload URL, `files.completeUploadExternal`) on the fake; a refused one becomes a note."""

from __future__ import annotations

from core.backends.sql.store import SqlStore
from core.bus.names import outbound_queue
from core.envelopes import Address, Attachment, Outbound
from core.providers.demo import DemoProvider
from tests.fakes.openai_api import tiny_png
from tests.fakes.slack_api import FakeSlack
from tests.fakes.slack_events import DM_CHANNEL
from tests.integration.slack_helpers import serving

PICTURE = Attachment(name="image-1.png", media_type="image/png", data=tiny_png(), image=True)
SHEET = Attachment(name="sales.csv", media_type="text/csv", data=b"month,total\nMay,12\n")


def _file_outbound(*files: Attachment, text: str = "", thread: str | None = None) -> Outbound:
    address = Address(platform="slack", chat=DM_CHANNEL, thread=thread)
    return Outbound(kind="file", address=address, text=text, attachments=list(files))


async def test_files_go_up_the_external_way_into_the_thread_with_the_caption_first(
    fake_slack: FakeSlack, store: SqlStore
) -> None:
    fake = fake_slack
    async with serving(fake, store, DemoProvider()) as s:
        await s.gateway.bus.enqueue(
            outbound_queue("slack"),
            _file_outbound(
                PICTURE, SHEET, text="The chart and its data", thread="1700000000.000100"
            ),
        )
        await fake.until(lambda: len(fake.uploads) == 2, "two shared files")
    picture, sheet = fake.uploads
    assert (picture.filename, picture.data) == ("image-1.png", PICTURE.data)
    assert (sheet.filename, sheet.data) == ("sales.csv", SHEET.data)
    assert {picture.channel, sheet.channel} == {DM_CHANNEL}
    assert {picture.thread_ts, sheet.thread_ts} == {"1700000000.000100"}
    assert (picture.initial_comment, sheet.initial_comment) == ("The chart and its data", None)
    assert len(fake.calls_to("files.getUploadURLExternal")) == 2


async def test_a_refused_share_becomes_a_note(fake_slack: FakeSlack, store: SqlStore) -> None:
    fake = fake_slack
    fake.fail_next(
        "files.completeUploadExternal", error="not_in_channel", status=200, retry_after=None
    )
    async with serving(fake, store, DemoProvider()) as s:
        await s.gateway.bus.enqueue(outbound_queue("slack"), _file_outbound(SHEET))
        await fake.until(
            lambda: any(
                "Could not send the file sales.csv" in t for t in fake.sent_texts(DM_CHANNEL)
            ),
            "the note",
        )
    assert fake.uploads == []
    assert "the platform refused it" in fake.sent_texts(DM_CHANNEL)[-1]
