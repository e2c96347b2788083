"""A store folder: the program a memory belongs to, and one write log per namespace.

Layout of a store (folders 0700, files 0600: the worker runs as another user and never sees it):
  store.json                 format, format_version, the program's name and sha256, when made
  program.py                 the program's source, as served
  namespaces/<name>/log.jsonl   one namespace's write log (mstar.memory.log)

A new store is made whole in a folder beside it and renamed into place, so two processes making
the same store at once both open it (one made it, the other reads it). A store belongs to one
program: opening it with another program (another hash) is refused with one line that says how
to move the memory over (`mstar memory migrate`). Namespace names are letters, digits, '_', '-'
and '.', starting with a letter or digit, at most 64 characters: a name is a folder, so nothing
in it may walk out of `namespaces/` (no '/', no '..').
"""
from __future__ import annotations

import datetime as dt
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mstar.memory.log import fsync_dir
from mstar.run.store import atomic_write_text

FORMAT = "mstar-memory-store"
FORMAT_VERSION = 2
# Version 2 logs hold entry ids and may have seq gaps (a forget); an older mstar would cut a last
# line with an id off as torn, so a version 1 store is marked 2 before this mstar writes to it.
READS_VERSIONS = (1, 2)
DEFAULT_NAMESPACE = "default"
# Used with fullmatch only: `$` alone also matches before a final newline, and "alice\n" would be a
# second folder beside "alice".
NAMESPACE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
# Within one store, the programs' chroma collections embed with the workers' own feature hashing
# (what evaluations use unless a command chose engine-served vectors, mstar.split.embed): replay
# must embed as the first pass did, so the choice is written down with the store.
PROGRAM_EMBEDDINGS = "hashing"


class StoreError(RuntimeError):
    """A store, program or namespace that cannot be used; the message is one line that names it."""


def check_namespace(name: object) -> str:
    if not isinstance(name, str) or not NAMESPACE_RE.fullmatch(name):
        shown = repr(name)[:80]
        raise StoreError(f"namespace {shown} refused: use 1-64 letters, digits, '_', '-' or '.', starting "
                         "with a letter or digit (no '/', no '..')")
    return name


def program_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class StoreFolder:
    root: Path
    source: str                  # the program's source
    name: str                    # the program's name (its file's stem when the store was made)
    sha256: str

    @property
    def namespaces_dir(self) -> Path:
        return self.root / "namespaces"

    def log_path(self, namespace: str) -> Path:
        """The log of `namespace` (its folder is made on first use)."""
        folder = self.namespaces_dir / check_namespace(namespace)
        for path in (self.namespaces_dir, folder):
            if not path.is_dir():
                path.mkdir(mode=0o700, exist_ok=True)
                fsync_dir(path.parent)        # a new namespace must survive a crash like its first write
        return folder / "log.jsonl"

    def namespaces(self) -> list[str]:
        """The namespaces that have a log, sorted."""
        if not self.namespaces_dir.is_dir():
            return []
        return sorted(p.name for p in self.namespaces_dir.iterdir()
                      if NAMESPACE_RE.fullmatch(p.name) and (p / "log.jsonl").is_file())


def open_store(root: str | Path, program: str | None = None, program_name: str = "program",
               *, create: bool = True) -> StoreFolder:
    """The store at `root`. `program` is the source to serve: a new store is made for it (when
    `create`); an existing one must hold the same program. Without `program` the store's own is
    used. Raises StoreError with one line."""
    root = Path(root)
    meta_path = root / "store.json"
    if meta_path.is_file():
        stored = _read_meta(root)
        source = _stored_source(root, stored)
        if create and stored["format_version"] != FORMAT_VERSION:
            upgrade(root, stored)
        if program is not None and program_hash(program) != stored["program_sha256"] \
                and not _same_code(program, source):
            raise StoreError(
                f"store {root} holds the memory of program {stored['program_name']!r} "
                f"(sha256 {stored['program_sha256'][:12]}); {program_name!r} is another program "
                f"(sha256 {program_hash(program)[:12]}) -- serve the store's own program, or move the memory "
                f"to the new one with `mstar memory migrate {root} --program <file>`")
        return StoreFolder(root, source, str(stored["program_name"]), str(stored["program_sha256"]))
    if program is None:
        raise StoreError(f"{root} is not a memory store (no store.json); give the program to serve")
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise StoreError(f"{root} exists and is not a memory store (no store.json); choose an empty or new folder")
    if not create:
        raise StoreError(f"{root} is not a memory store")
    try:
        meta = _create(root, program, program_name)
    except OSError as exc:
        if not (root / "store.json").is_file():
            raise StoreError(f"store {root} cannot be made: {exc.strerror or exc}") from None
        return open_store(root, program, program_name, create=create)   # another process made it first
    return StoreFolder(root, program, program_name, meta["program_sha256"])


def _create(root: Path, program: str, program_name: str) -> dict:
    """Make the store whole in a folder beside `root` and rename it there: another process making
    the same store at the same moment sees no store or a complete one, never a folder with a
    program and no store.json yet (which it would refuse as not a store). OSError when another
    process made it first (the rename finds `root` not empty)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "program_name": program_name,
            "program_sha256": program_hash(program), "program_embeddings": PROGRAM_EMBEDDINGS,
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    try:
        building: Path | None = Path(tempfile.mkdtemp(prefix=f".{root.name}.new-", dir=root.parent))  # 0700
    except OSError:
        if not root.is_dir():
            raise
        building = None             # an empty folder given in a parent we may not write to
    if building is not None:
        try:
            _write(building, program, meta)
            try:
                os.rename(building, root)   # replaces an empty folder; refused when `root` is not empty
            except OSError as exc:
                # ENOTEMPTY / EEXIST: another process made it first. EBUSY / EXDEV / ENOTDIR: `root`
                # is a mount point or a link to an empty folder, made in place below.
                if exc.errno not in (errno.EBUSY, errno.EXDEV, errno.ENOTDIR) or not root.is_dir():
                    raise
            else:
                fsync_dir(root.parent)
                return meta
        finally:
            shutil.rmtree(building, ignore_errors=True)
    # `root` cannot be renamed over (a mount point, a link to an empty folder) or beside: the
    # store is made in it, store.json last (its presence means "complete").
    _write(root, program, meta)
    os.chmod(root, 0o700)
    return meta


def _write(folder: Path, program: str, meta: dict) -> None:
    atomic_write_text(folder / "program.py", program)
    atomic_write_text(folder / "store.json", json.dumps(meta, indent=2) + "\n")
    for path in (folder / "program.py", folder / "store.json"):
        os.chmod(path, 0o600)
    fsync_dir(folder)


def _read_meta(root: Path) -> dict:
    path = root / "store.json"
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path} cannot be read: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise StoreError(f"{path} is not the metadata of an mstar memory store")
    if meta.get("format_version") not in READS_VERSIONS:
        raise StoreError(f"store {root} has format version {meta.get('format_version')!r}; this mstar reads "
                         f"versions {', '.join(map(str, READS_VERSIONS))} (use the mstar that wrote it, or migrate "
                         "from it)")
    if meta.get("program_embeddings", PROGRAM_EMBEDDINGS) != PROGRAM_EMBEDDINGS:
        raise StoreError(f"store {root} embeds with {meta.get('program_embeddings')!r}; this mstar replays "
                         f"with {PROGRAM_EMBEDDINGS!r} only")
    if not isinstance(meta.get("program_sha256"), str):
        raise StoreError(f"{path} names no program hash")
    return meta


def upgrade(root: Path, meta: dict | None = None) -> None:
    """Mark a store as this version's before anything of this version is written to it."""
    meta = meta if meta is not None else _read_meta(root)
    if meta["format_version"] != FORMAT_VERSION:
        atomic_write_text(root / "store.json", json.dumps({**meta, "format_version": FORMAT_VERSION}, indent=2) + "\n")
        os.chmod(root / "store.json", 0o600)


def _same_code(program: str, stored: str) -> bool:
    """The two texts run the same code: they differ at most in comments and blank lines (`mstar
    export` heads the file with the time of the export, so exporting the same winner again must not
    make it another program). The store goes on serving its own text."""
    from mstar.iteration.behaviour import code_fingerprint
    mine = code_fingerprint(program)
    return mine is not None and mine == code_fingerprint(stored)


def _stored_source(root: Path, meta: dict) -> str:
    path = root / "program.py"
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"{path} cannot be read: {exc}") from None
    if program_hash(source) != meta["program_sha256"]:
        raise StoreError(f"{path} was changed after the store was made (its sha256 is not the one in "
                         "store.json); the store's memory belongs to the original program")
    return source
