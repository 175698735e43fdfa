"""The stored-images contract (`StoredImages`, and how `ConversationLog` keeps a message's
images apart), on SQLite and PostgreSQL: a stored message holds references, the bytes are kept
once per session, go with the session, are copied into a fork, exported with a person's data
and erased with it.

Run against every implementation by the `store` fixture of `tests/contract/conftest.py`.
"""

from __future__ import annotations

import hashlib

from core.envelopes import Address
from core.messages import ImagePart, Message
from core.store import Store, TurnClose, TurnOpening
from core.store.people import Person

# A PNG header of a 640x480 image (enough for its size to be read), and a GIF of 3x2.
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + (640).to_bytes(4) + (480).to_bytes(4) + b"\x08\x02"
GIF = b"GIF89a\x03\x00\x02\x00" + bytes(range(40))
ANN = Person(platform="telegram", user_id="42")
GROUP = Address(platform="telegram", bot="b", chat="-100")


def _photo(data: bytes = PNG, text: str = "look") -> Message:
    return Message.user(text, [ImagePart(media_type="image/png", data=data)])


async def test_a_stored_message_refers_to_its_image_kept_apart(store: Store) -> None:
    session = await store.current_session("telegram:b:1")
    other = await store.current_session("telegram:b:2")

    stored = await store.append_message(session.id, _photo())

    (image,) = stored.images
    assert image.data == b"" and image.ref == hashlib.sha256(PNG).hexdigest()
    assert (image.width, image.height, image.media_type) == (640, 480, "image/png")
    assert await store.list_messages(session.id) == [stored]
    assert await store.image(session.id, image.ref) == PNG
    # Another session's images are not this one's.
    assert await store.image(other.id, image.ref) is None


async def test_the_same_image_twice_is_one_reference(store: Store) -> None:
    session = await store.current_session("telegram:b:1")

    first = await store.append_message(session.id, _photo())
    second = await store.append_message(session.id, _photo(text="again"))
    gif = await store.append_message(
        session.id, Message.user("", [ImagePart(media_type="image/gif", data=GIF)])
    )

    assert first.images[0].ref == second.images[0].ref
    assert (gif.images[0].width, gif.images[0].height) == (3, 2)
    assert gif.images[0].ref is not None
    assert await store.image(session.id, gif.images[0].ref) == GIF


async def test_a_turns_close_keeps_its_images_apart_too(store: Store) -> None:
    # What a turn closes with goes through the same append: bytes in, reference out.
    session = await store.current_session("telegram:b:1")

    [stored] = await store.close_turn(TurnClose(session_id=session.id, messages=[_photo()]))

    assert stored.images[0].data == b""
    assert stored.images[0].ref is not None
    assert await store.image(session.id, stored.images[0].ref) == PNG


async def test_deleting_a_session_deletes_its_images(store: Store) -> None:
    session = await store.current_session("telegram:b:1")
    ref = (await store.append_message(session.id, _photo())).images[0].ref
    assert ref is not None

    assert await store.delete_session(session.id)

    assert await store.image(session.id, ref) is None


async def test_a_fork_has_its_own_copy_of_the_images(store: Store) -> None:
    session = await store.current_session("telegram:b:1")
    ref = (await store.append_message(session.id, _photo())).images[0].ref
    assert ref is not None

    fork = await store.fork_session(session.id)
    await store.delete_session(session.id)

    [copied] = await store.list_messages(fork.id)
    assert copied.images[0].ref == ref
    assert await store.image(fork.id, ref) == PNG


async def test_a_persons_images_are_exported_and_erased(store: Store) -> None:
    dm = await store.open_turn(
        TurnOpening(
            session_id="dm1",
            session_key="telegram:b:dm-ann",
            message=_photo().model_copy(update={"author": str(ANN)}),
            direct_with=str(ANN),
        )
    )
    group = await store.open_turn(
        TurnOpening(
            session_id="g1",
            session_key=GROUP.session_key,
            message=_photo(GIF, "bob's").model_copy(update={"author": "telegram:7"}),
        )
    )
    await store.close_turn(
        TurnClose(
            session_id="g1",
            messages=[_photo(text="ann's").model_copy(update={"author": str(ANN)})],
        )
    )
    bobs, anns = await store.list_messages(group.session.id)
    ann_ref, bob_ref = anns.images[0].ref, bobs.images[0].ref
    assert ann_ref is not None and bob_ref is not None

    data = await store.personal_data(ANN)

    # The export holds the bytes, not only the references.
    [direct] = data.direct_conversations
    assert direct.messages[0].images[0].data == PNG
    assert [m.images[0].data for g in data.group_messages for m in g.messages] == [PNG]

    await store.erase_person(ANN)

    assert await store.image(dm.session.id, ann_ref) is None
    assert await store.image(group.session.id, ann_ref) is None
    assert await store.image(group.session.id, bob_ref) == GIF


async def test_erasing_reaches_the_images_copied_into_a_fork(store: Store) -> None:
    await store.open_turn(
        TurnOpening(
            session_id="g1",
            session_key=GROUP.session_key,
            message=_photo(text="ann's").model_copy(update={"author": str(ANN)}),
        )
    )
    fork = await store.fork_session("g1")
    [copied] = await store.list_messages(fork.id)
    ref = copied.images[0].ref
    assert ref is not None and await store.image(fork.id, ref) == PNG

    await store.erase_person(ANN)

    assert await store.image("g1", ref) is None
    assert await store.image(fork.id, ref) is None
