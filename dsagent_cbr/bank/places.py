"""Where a bank's derived vector store lives, generation by generation, and the switch between them.

A rebuild writes a whole new store beside the one in use (a new folder, or new collections on a Chroma
server), marks it complete, and then switches a pointer to it in one atomic step (a file renamed over the
old pointer, or one metadata update on the server); only then is the old store deleted. A SIGKILL at any
moment therefore leaves the old store in use or the new one, never a mix, and whatever is left over is
finished or rolled back by `recover` on the next command.

Generation 0 is the layout of banks made before generations existed (`<bank>/chroma`, or the `cbr-*`
collections on a server), so such banks open unchanged."""

from __future__ import annotations

import contextlib
import re
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from dsagent_cbr.bank.checks import KINDS
from dsagent_cbr.bank.integrity import damaged, sqlite_problem
from dsagent_cbr.bank.store import VectorStore
from dsagent_cbr.files import fsync_dir, write_bytes_atomic

COMPLETE = ".complete"


class Place(Protocol):
    label: str  # how messages name where the index lives
    shared: bool  # other people's banks may write to it (a Chroma server)

    def where(self, slot: str) -> str:
        """The folder or collections of `slot`, for people to read."""

    def slots(self) -> list[str]: ...

    def current(self) -> str | None: ...

    def generation(self, slot: str) -> int: ...

    def new_slot(self) -> str: ...

    def open(self, slot: str, fresh: bool = False) -> VectorStore:
        """The store in `slot`; an existing one is checked first and CbrError names a damaged file."""

    def is_complete(self, slot: str) -> bool: ...

    def mark_complete(self, slot: str, store: VectorStore) -> None: ...

    def point_to(self, slot: str) -> None: ...

    def discard(self, slot: str) -> None: ...

    def sweep(self) -> None:
        """Finish deleting what a killed discard left."""


def _next(place: Place) -> str:
    """The next generation number, with a random tail: a rolled-back generation's name is never used again
    (a process that opened the old one, Chroma's client cache among them, must not mistake the two)."""
    number = max((place.generation(s) for s in place.slots()), default=0) + 1
    return f"{number}-{secrets.token_hex(3)}"


class FolderPlace:
    """An embedded store (Chroma or FAISS) in `<bank>/<store>.g<N>-<tail>/`; `<bank>/<store>.current` names
    the folder in use."""

    def __init__(self, bank_dir: Path, store: str, chroma: bool, hnsw: bool = False) -> None:
        self.bank_dir = bank_dir
        self.store = store
        self.chroma = chroma
        self.hnsw = hnsw
        self.pointer = bank_dir / f"{store}.current"
        self.label = str(bank_dir / store)
        self.shared = False
        self._pattern = re.compile(rf"^{re.escape(store)}(?:\.g(\d+)-[0-9a-f]+)?$")

    def where(self, slot: str) -> str:
        return str(self.bank_dir / slot)

    def slots(self) -> list[str]:
        return sorted(
            (p.name for p in self.bank_dir.iterdir() if p.is_dir() and self._pattern.match(p.name)),
            key=self.generation,
        )

    def generation(self, slot: str) -> int:
        found = self._pattern.match(slot)
        return int(found.group(1) or 0) if found else -1

    def current(self) -> str | None:
        if self.pointer.is_file():
            return self.pointer.read_text(encoding="utf-8").strip() or None
        # generation 0: no pointer yet
        return self.store if (self.bank_dir / self.store).is_dir() else None

    def new_slot(self) -> str:
        return f"{self.store}.g{_next(self)}"

    def open(self, slot: str, fresh: bool = False) -> VectorStore:
        folder = self.bank_dir / slot
        if fresh:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
        elif not folder.is_dir():
            raise damaged(folder, "is missing")
        if self.chroma:
            from dsagent_cbr.bank.chroma_store import ChromaStore

            if not fresh:
                problem = sqlite_problem(folder / "chroma.sqlite3")
                if problem:
                    raise damaged(folder / "chroma.sqlite3", problem)
            return ChromaStore(path=folder)
        from dsagent_cbr.bank.faiss_store import FaissStore

        return FaissStore(folder, hnsw=self.hnsw)

    def is_complete(self, slot: str) -> bool:
        return (self.bank_dir / slot / COMPLETE).is_file()

    def mark_complete(self, slot: str, store: VectorStore) -> None:
        write_bytes_atomic(self.bank_dir / slot / COMPLETE, b"")

    def point_to(self, slot: str) -> None:
        write_bytes_atomic(self.pointer, slot.encode("utf-8"))

    def discard(self, slot: str) -> None:
        folder = self.bank_dir / slot
        if folder.is_dir():
            # renamed first so that a kill half-way through the delete leaves no folder that looks like a store
            doomed = folder.with_name(f".discard-{slot}")
            shutil.rmtree(doomed, ignore_errors=True)
            folder.rename(doomed)
            fsync_dir(self.bank_dir)
            shutil.rmtree(doomed, ignore_errors=True)

    def sweep(self) -> None:
        for stale in self.bank_dir.glob(".discard-*"):
            shutil.rmtree(stale, ignore_errors=True)


class ServerPlace:
    """Collections on a Chroma server: `cbr-g<N>-<tail>-<kind>` for each kind and `-meta`; the
    metadata of the collection `cbr-bank-current` names the generation in use, for everyone who shares
    the server."""

    POINTER = "cbr-bank-current"

    def __init__(self, url: str) -> None:
        from dsagent_cbr.bank.chroma_store import connect

        self.url = url
        self.label = f"the Chroma server at {url}"
        self.shared = True
        self.client = connect(url)
        self._pattern = re.compile(rf"^(cbr(?:-g(\d+)-[0-9a-f]+)?)-(?:{'|'.join(KINDS)}|meta)$")

    def where(self, slot: str) -> str:
        return f"{self.url} (collections {slot}-*)"

    @contextlib.contextmanager
    def _answering(self) -> Iterator[None]:
        """A server that stops answering mid-run is ours to report (exit 3, the run's record saved), never a
        traceback of the HTTP client's."""
        from dsagent_cbr.errors import InfrastructureError

        try:
            yield
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise InfrastructureError(
                f"The Chroma server at {self.url} stopped answering: {first}"
            ) from exc

    def _names(self) -> list[str]:
        with self._answering():
            return [c if isinstance(c, str) else c.name for c in self.client.list_collections()]

    def slots(self) -> list[str]:
        found = {m.group(1) for n in self._names() if (m := self._pattern.match(n))}
        if "cbr-bank-meta" in self._names():
            found.add("cbr")
        return sorted(found, key=self.generation)

    def generation(self, slot: str) -> int:
        found = re.fullmatch(r"cbr(?:-g(\d+)-[0-9a-f]+)?", slot)
        return int(found.group(1) or 0) if found else -1

    def current(self) -> str | None:
        if self.POINTER in self._names():
            with self._answering():
                meta = self.client.get_collection(self.POINTER).metadata or {}
            if meta.get("current"):
                return str(meta["current"])
        return "cbr" if "cbr" in self.slots() else None

    def new_slot(self) -> str:
        return f"cbr-g{_next(self)}"

    def open(self, slot: str, fresh: bool = False) -> VectorStore:
        from dsagent_cbr.bank.chroma_store import ChromaStore

        if fresh:
            self.discard(slot)
        return ChromaStore(url=self.url, prefix=slot, client=self.client)

    def is_complete(self, slot: str) -> bool:
        try:
            return self.open(slot).get_meta().get("complete") == "1"
        except Exception:  # a half-made generation may lack its meta collection
            return False

    def mark_complete(self, slot: str, store: VectorStore) -> None:
        store.set_meta({"complete": "1"})

    def point_to(self, slot: str) -> None:
        with self._answering():
            col = self.client.get_or_create_collection(self.POINTER, embedding_function=None)
            col.modify(metadata={"current": slot})

    def discard(self, slot: str) -> None:
        meta = "cbr-bank-meta" if slot == "cbr" else f"{slot}-meta"
        for name in (*(f"{slot}-{kind}" for kind in KINDS), meta):
            with contextlib.suppress(Exception):  # not there: nothing to delete
                self.client.delete_collection(name)

    def sweep(self) -> None:
        """Nothing to do: a collection is deleted in one call."""


def recover(place: Place, roll_back: bool = True) -> str | None:
    """Finish or roll back what an interrupted rebuild left; one line saying which, or None.

    Without roll_back an unfinished newer generation is left alone: on a shared server it may be a
    teammate's rebuild in progress (the bank lock is only local), so there only a rebuild clears it."""
    place.sweep()
    current = place.current()
    now = place.generation(current) if current else -1
    others = [s for s in place.slots() if s != current]
    if not roll_back:
        others = [s for s in others if place.generation(s) < now or place.is_complete(s)]
    if not others:
        return None
    newer = [s for s in others if place.generation(s) > now]
    done = [s for s in newer if place.is_complete(s)]
    if done:
        target = max(done, key=place.generation)
        place.point_to(target)
        for slot in [s for s in [*others, current] if s and s != target]:
            place.discard(slot)
        return (
            f"An interrupted `cbr bank rebuild` was finished: the index it had completed, "
            f"{place.where(target)}, is now in use."
        )
    for slot in others:
        place.discard(slot)
    if newer:
        return (
            f"An interrupted `cbr bank rebuild` was rolled back: its unfinished index, "
            f"{', '.join(place.where(s) for s in newer)}, was removed and the bank is as it was before."
        )
    return (
        f"An interrupted `cbr bank rebuild` was finished: the old index it had replaced, "
        f"{', '.join(place.where(s) for s in others)}, was removed."
    )


def make_place(store: str, bank_dir: Path, chroma_url: str | None) -> Place:
    if store == "chroma" and chroma_url:
        return ServerPlace(chroma_url)
    return FolderPlace(bank_dir, store, chroma=store == "chroma", hnsw=store == "faiss-hnsw")
