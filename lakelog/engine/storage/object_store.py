"""Where a store's bytes live: local paths or S3, as seen from Python.

Spark reaches an ``s3a://`` store through Hadoop's S3A and Delta's LogStore;
lakelog's Python side (Parquet reads with pyarrow over fsspec/s3fs, the Delta
log with delta-rs, commit files with botocore) reaches the same objects and must
use the same endpoint and credentials. They come from, in this order:

1. settings registered for the bucket in this process (:func:`configure`),
   which ``Store.open`` derives from its session's Hadoop configuration
   (``spark.hadoop.fs.s3a.*`` / ``fs.s3a.bucket.<bucket>.*``);
2. the usual AWS environment (``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``,
   ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
   ``AWS_REGION``), which is also what S3A's default credential chain reads
   and what Python workers started by Spark inherit from the driver.

Anything left unset is left to each client's own default chain (profiles,
instance metadata). ``s3a://`` and ``s3n://`` are Hadoop's names for S3;
fsspec and delta-rs are given ``s3://``.

The commit primitive, :func:`put_if_absent`, is ``link(2)`` on a local path
and S3's conditional write (``PutObject`` with ``If-None-Match: *``, refused
with 412 when the key exists; AWS S3 User Guide, "Conditional writes") on
S3 -- the same request io.lakelog.storage.ConditionalS3LogStore makes through
S3A, so lakelog's commits and a Spark session's own Delta commits (a user's
SQL OPTIMIZE) exclude each other.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from lakelog.engine.errors import CommitNotDurableError, CommitStateUnknownError
from lakelog.engine.storage.parallel_sync import sync_paths
from lakelog.engine.storage.unique_ids import new_uuid

if TYPE_CHECKING:
    import fsspec

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})

# User metadata key carrying a commit's random write id: after a refused or
# lost response, a HEAD tells our own landed write from somebody else's.
# ConditionalS3LogStore.WRITE_ID_KEY is the same.
WRITE_ID_KEY = "lakelog-write-id"


def is_s3(uri: str) -> bool:
    return urlparse(uri).scheme in S3_SCHEMES


def is_local(uri: str) -> bool:
    """Whether ``uri`` is a local path (no scheme): read and written with plain file calls."""
    return not is_s3(uri) and "://" not in uri


def bucket_and_key(uri: str) -> tuple[str, str]:
    """``s3a://bucket/a/b`` -> ``("bucket", "a/b")``."""
    parsed = urlparse(uri)
    return parsed.netloc, parsed.path.lstrip("/")


def python_uri(uri: str) -> str:
    """The URI as fsspec and delta-rs name it (``s3://`` for any S3 scheme)."""
    if is_s3(uri):
        bucket, key = bucket_and_key(uri)
        return f"s3://{bucket}/{key}".rstrip("/")
    return uri


@dataclass(frozen=True)
class S3Settings:
    """Endpoint and credentials of one bucket, as every Python client needs them."""

    endpoint: str | None = None  # with scheme, e.g. http://127.0.0.1:9000
    region: str | None = None
    access_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    path_style: bool = False

    @property
    def allow_http(self) -> bool:
        return bool(self.endpoint) and self.endpoint.startswith("http://")

    def delta_rs_options(self) -> dict[str, str]:
        """delta-rs (object_store) storage options.

        ``conditional_put=etag`` makes delta-rs create commit files with
        ``If-None-Match: *`` (object_store's S3ConditionalPut::ETagMatch;
        delta-rs docs, "CloudFlare R2 & Minio"), the same put-if-absent as
        lakelog's: without it delta-rs refuses to write to S3 at all unless
        told the write is unsafe or given a DynamoDB lock. delta-rs writes
        only checkpoints here (and deletes expired log files), never a commit.
        """
        options = {"conditional_put": "etag", "AWS_REGION": self.region or "us-east-1"}
        if self.endpoint:
            options["AWS_ENDPOINT_URL"] = self.endpoint
        if self.allow_http:
            options["AWS_ALLOW_HTTP"] = "true"
        if self.path_style:
            options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false"
        if self.access_key and self.secret_key:
            options["AWS_ACCESS_KEY_ID"] = self.access_key
            options["AWS_SECRET_ACCESS_KEY"] = self.secret_key
        if self.session_token:
            options["AWS_SESSION_TOKEN"] = self.session_token
        return options

    def botocore_kwargs(self) -> dict[str, Any]:
        from botocore.config import Config

        kwargs: dict[str, Any] = {
            "region_name": self.region or "us-east-1",
            "config": Config(
                s3={"addressing_style": "path" if self.path_style else "auto"},
                retries={"mode": "standard", "max_attempts": 5},
            ),
        }
        if self.endpoint:
            kwargs["endpoint_url"] = self.endpoint
        if self.access_key and self.secret_key:
            kwargs["aws_access_key_id"] = self.access_key
            kwargs["aws_secret_access_key"] = self.secret_key
        if self.session_token:
            kwargs["aws_session_token"] = self.session_token
        return kwargs

    def s3fs_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            # The Delta log changes under us: a cached listing would hide new commits.
            "use_listings_cache": False,
            "client_kwargs": {"region_name": self.region or "us-east-1"},
            "config_kwargs": {"s3": {"addressing_style": "path" if self.path_style else "auto"}},
        }
        if self.endpoint:
            kwargs["endpoint_url"] = self.endpoint
        if self.access_key and self.secret_key:
            kwargs["key"], kwargs["secret"] = self.access_key, self.secret_key
        if self.session_token:
            kwargs["token"] = self.session_token
        return kwargs


def _endpoint_with_scheme(endpoint: str | None, ssl: bool) -> str | None:
    if not endpoint:
        return None
    if "://" in endpoint:
        return endpoint.rstrip("/")
    return f"{'https' if ssl else 'http'}://{endpoint.rstrip('/')}"


def settings_from_env(env: Mapping[str, str] | None = None) -> S3Settings:
    """The AWS SDKs' environment variables (``AWS_ENDPOINT_URL_S3`` wins over ``AWS_ENDPOINT_URL``)."""
    env = os.environ if env is None else env
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None
    return S3Settings(
        endpoint=_endpoint_with_scheme(endpoint, ssl=True),
        region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
        access_key=env.get("AWS_ACCESS_KEY_ID") or None,
        secret_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
        session_token=env.get("AWS_SESSION_TOKEN") or None,
        # A custom endpoint (MinIO, Ceph, moto) rarely serves virtual-host names.
        path_style=endpoint is not None,
    )


def settings_from_hadoop(
    get: Callable[[str], str | None], bucket: str, env: Mapping[str, str] | None = None
) -> S3Settings:
    """S3A's settings for ``bucket`` (per-bucket ``fs.s3a.bucket.<b>.*`` first), the
    environment filling what they leave unset -- as S3A itself does."""

    def value(suffix: str) -> str | None:
        for key in (f"fs.s3a.bucket.{bucket}.{suffix}", f"fs.s3a.{suffix}"):
            found = get(key)
            if found not in (None, ""):
                return str(found).strip()
        return None

    base = settings_from_env(env)
    ssl = (value("connection.ssl.enabled") or "true").lower() != "false"
    endpoint = _endpoint_with_scheme(value("endpoint"), ssl)
    path_style = value("path.style.access")
    return S3Settings(
        endpoint=endpoint or base.endpoint,
        region=value("endpoint.region") or base.region,
        access_key=value("access.key") or base.access_key,
        secret_key=value("secret.key") or base.secret_key,
        session_token=value("session.token") or base.session_token,
        path_style=(path_style.lower() == "true") if path_style is not None and endpoint else base.path_style,
    )


_lock = threading.Lock()
_configured: dict[str, S3Settings] = {}


def configure(uri: str, settings: S3Settings) -> None:
    """Use ``settings`` for every Python-side access to the bucket of ``uri`` in this process."""
    bucket, _ = bucket_and_key(uri)
    with _lock:
        _configured[bucket] = settings


def settings_for(uri: str) -> S3Settings:
    bucket, _ = bucket_and_key(uri)
    with _lock:
        found = _configured.get(bucket)
    return found if found is not None else settings_from_env()


@dataclass(frozen=True)
class StoreAccess:
    """How to reach a store's objects, carried into another process (a Spark task or
    Python worker) whose environment may not hold the endpoint or credentials.

    ``settings`` is None for local stores, or when the process should use its
    own environment. Secrets stay out of ``repr``; they do travel in pickles, as
    Spark's own task closures carry credentials given in options.
    """

    uri: str
    settings: S3Settings | None = None

    def install(self) -> None:
        """Use these settings for the store's bucket in this process (idempotent)."""
        if self.settings is not None and is_s3(self.uri):
            configure(self.uri, self.settings)


def store_access(uri: str) -> StoreAccess:
    """This process's way to ``uri``, to hand to tasks that run elsewhere."""
    return StoreAccess(uri, settings_for(uri) if is_s3(uri) else None)


def filesystem(uri: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """An fsspec filesystem for ``uri`` and the root path within it (no trailing slash).

    For an absolute local path (what a store's URI is, ``normalize_uri``) fsspec is imported
    only when the filesystem is first used: the commit core reads and writes local files with
    plain file calls, and importing fsspec (asyncio, ssl, a scan of the installed packages'
    entry points) is ~60 ms of a short-lived client's start."""
    if is_s3(uri):
        import s3fs

        bucket, key = bucket_and_key(uri)
        fs = s3fs.S3FileSystem(**settings_for(uri).s3fs_kwargs())
        return fs, f"{bucket}/{key}".rstrip("/")
    if uri.startswith("/") and "::" not in uri:
        # fsspec's own root for such a path is the path itself (make_path_posix), the
        # filesystem its cached LocalFileSystem (what url_to_fs gives it).
        return _LocalFileSystem(), uri.rstrip("/")  # type: ignore[return-value]
    import fsspec

    fs, root = fsspec.core.url_to_fs(uri)
    return fs, root.rstrip("/")


class _LocalFileSystem:
    """fsspec's local filesystem, imported on the first use of any of its attributes."""

    def __getattr__(self, name: str) -> Any:
        import fsspec

        return getattr(fsspec.filesystem("file"), name)


def replace_file(fs: fsspec.AbstractFileSystem, directory: str, name: str, body: bytes) -> None:
    """Write ``directory/name`` whole, over whatever was there: a reader sees the old object or
    the new one, never a part. Locally a temporary file renamed over it (``os.replace``), on S3 a
    plain PUT (atomic per object). Raises OSError; then no temporary file is left and the old
    object is unchanged."""
    if not _is_local(fs):
        with fs.open(f"{directory}/{name}", "wb") as handle:
            handle.write(body)
        return
    replace_local_file(directory, name, body)


def replace_local_file(directory: str, name: str, body: bytes | memoryview) -> None:
    """:func:`replace_file` for a local directory, without an fsspec filesystem (created if
    missing; not synced). Raises OSError; then no temporary file is left and the old file is
    unchanged."""
    os.makedirs(directory, exist_ok=True)
    temp = f"{directory}/.{new_uuid().hex}.tmp"
    try:
        write_new_file(temp, body, sync=False)
        os.replace(temp, f"{directory}/{name}")
    except BaseException:
        # A full disk fails the write after the file was created: leave nothing behind.
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _is_local(fs: fsspec.AbstractFileSystem) -> bool:
    return "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,))


def remove_tree(uri: str) -> None:
    """Delete everything under ``uri`` (a local directory or an S3 prefix); nothing if absent."""
    fs, root = filesystem(uri)
    if fs.exists(root):
        fs.rm(root, recursive=True)


def delta_storage_options(uri: str) -> dict[str, str] | None:
    """``storage_options`` for delta-rs' DeltaTable (None for local paths)."""
    return settings_for(uri).delta_rs_options() if is_s3(uri) else None


_clients: dict[tuple[int, S3Settings], Any] = {}


def _s3_client(settings: S3Settings) -> Any:
    # One client per settings and process: building one costs ~50 ms, and a
    # client must not cross a fork (PySpark forks its Python workers).
    key = (os.getpid(), settings)
    with _lock:
        client = _clients.get(key)
        if client is None:
            import botocore.session

            client = botocore.session.get_session().create_client("s3", **settings.botocore_kwargs())
            _clients[key] = client
        return client


def put_if_absent(
    directory: str,
    name: str,
    data: bytes,
    *,
    durable: bool = True,
    with_files: Sequence[str] = (),
    linked: Callable[[], None] | None = None,
    while_syncing: Callable[[], None] | None = None,
) -> bool:
    """Create ``directory/name`` holding ``data`` atomically; False if it already exists.

    Raises OSError when the write certainly did not happen (nothing was
    created, and no temporary file is left behind: also on ENOSPC),
    CommitStateUnknownError when it may have happened, CommitNotDurableError
    when the file was created but could not be synced. Locally, unless
    ``durable`` is False (data that can be derived again, such as a checksum),
    the file is synced before it appears and ``directory`` after it appeared,
    so that a True return survives a power loss (:func:`sync_directory`). On
    S3 a PUT is durable when it is acknowledged. Its mode is what the process
    umask gives, as for any file the process creates. Locally the bytes go first to a file
    no reader sees, linked into place whole: unnamed (``O_TMPFILE``, :func:`_unnamed_file`)
    where the file system makes such files, else under a temporary name removed after.

    ``with_files``: local files (a commit's data files) that must be durable before this
    one appears; they and their directories are synced together with the temporary file,
    before it is linked, in one round (:func:`sync_all`: one journal commit) instead of
    a round of their own before this call. Ignored on S3 (a PUT is durable).

    ``linked``: called locally once the file is in place and before ``directory`` is synced
    (every reader sees it from then on; a committer's turn ends there, engine.storage.turns);
    it must not raise.

    ``while_syncing``: work for the calling thread while the disk is busy (a committer's
    next state, derived before it knows whether the file will be created): called once
    locally, once the file's data is written, while it and ``with_files`` are synced, and on
    S3 before the PUT; not called when writing fails before; it must not raise.
    """
    if is_s3(directory):
        if while_syncing is not None:
            while_syncing()
        bucket, prefix = bucket_and_key(directory)
        return _s3_put_if_absent(settings_for(directory), bucket, f"{prefix.rstrip('/')}/{name}".lstrip("/"), data)
    return _local_put_if_absent(directory, name, data, durable, with_files, linked, while_syncing)


def _local_put_if_absent(
    directory: str,
    name: str,
    data: bytes,
    durable: bool = True,
    with_files: Sequence[str] = (),
    linked: Callable[[], None] | None = None,
    while_syncing: Callable[[], None] | None = None,
) -> bool:
    final = os.path.join(directory, name)
    staged = _StagedFile(directory, name)
    try:
        staged.write(data, sync=durable and not with_files and while_syncing is None)
        if with_files or (durable and while_syncing is not None):
            sync_all(
                [*([staged.path] if durable else []), *with_files],
                sorted({os.path.dirname(f) for f in with_files}),
                meanwhile=while_syncing,
            )
        elif while_syncing is not None:
            while_syncing()
        if not staged.link(final):
            return False
        if linked is not None:
            linked()
    finally:
        # Also when writing or syncing the file failed (a full disk): nothing of a failed put
        # stays behind.
        staged.discard()
    if durable:
        try:
            sync_directory(directory)
        except OSError as exc:
            # Visible to every reader now, so not "nothing was created"; whether it survives
            # a crash cannot be told (after a failed fsync Linux may already have dropped
            # the dirty pages: PostgreSQL's "fsyncgate").
            raise CommitNotDurableError(
                f"{final} was created but {directory} could not be synced to disk: {exc}; "
                "it may not survive a power loss"
            ) from exc
    return True


# O_TMPFILE (Linux 3.11; ext4, XFS, Btrfs, tmpfs and others make such files) and /proc to link
# one by: a put without them writes a named temporary file instead.
_O_TMPFILE = getattr(os, "O_TMPFILE", None) if os.path.isdir("/proc/self/fd") else None


class _StagedFile:
    """A put's bytes before they have their name, in the directory they go to but seen by no
    reader: an unnamed file (:func:`_unnamed_file`) where the file system makes them, else a
    file under a hidden temporary name. :meth:`link` gives it its name, whole; :meth:`discard`
    leaves nothing else behind (an unnamed file is gone once closed, a temporary name is
    removed)."""

    def __init__(self, directory: str, name: str) -> None:
        self._fd = _unnamed_file(directory)
        # What the file is synced and linked by: its /proc link, or its temporary name.
        self.path = (
            os.path.join(directory, f".{name}.{new_uuid().hex}.tmp")
            if self._fd is None
            else f"/proc/self/fd/{self._fd}"
        )

    def write(self, data: bytes | memoryview, *, sync: bool) -> None:
        """Write all of ``data``, then sync it when ``sync``. Raises OSError."""
        if self._fd is None:
            write_new_file(self.path, data, sync=sync)
            return
        _write_all(self._fd, data)
        if sync:
            os.fsync(self._fd)

    def link(self, final: str) -> bool:
        """Give the file the name ``final``; False if that name exists. Raises OSError."""
        try:
            if self._fd is None:
                os.link(self.path, final)
            else:
                # linkat(2) following the /proc link to the file (open(2), O_TMPFILE); CPython
                # calls it only when given a directory descriptor (plain link(2) would link the
                # /proc symlink itself: EXDEV), which the absolute source path leaves unused.
                os.link(self.path, final, src_dir_fd=self._fd)
        except FileExistsError:
            return False
        return True

    def discard(self) -> None:
        """Close the unnamed file or remove the temporary name (a linked file keeps its name)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        else:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


def _unnamed_file(directory: str) -> int | None:
    """A descriptor, open for writing, of a new file in ``directory`` that has no name yet
    (``O_TMPFILE``): its bytes and its inode can be synced before it gets a name, and it
    vanishes with its descriptor. None where the file system or the kernel makes none; other
    failures raise OSError.

    Cheaper than a named temporary file for a commit: no name is created and removed in the
    log's directory, and on ext4 without a journal (this project's test machines) the fsync of
    a newly named file also syncs its directory (``ext4_sync_parent``), which the put syncs
    once more after the link anyway. Measured on such a machine: a commit's put 183 us of CPU
    (244 with a named temporary file), 392 us (447) end to end; a ``.crc``'s 33 us (79)."""
    if _O_TMPFILE is None:
        return None
    try:
        return os.open(directory, os.O_WRONLY | _O_TMPFILE | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        # EOPNOTSUPP: a file system without them; EISDIR: a kernel that predates O_TMPFILE
        # (it sees O_DIRECTORY's bit and refuses to write a directory).
        if exc.errno in (errno.EOPNOTSUPP, errno.EISDIR):
            return None
        raise


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_new_file(path: str, data: bytes | memoryview, *, sync: bool) -> None:
    """Create the local file ``path`` (which must not exist) holding ``data``; fsync'd first
    with ``sync``. Raises OSError (FileExistsError if it exists; after any other failure no
    file is left).

    Straight system calls rather than ``open()``: a buffered file object also asks the file
    for its size, position and terminal state (three more system calls; an agent's commit
    writes its data file so, and its commit file so where no unnamed file can be made)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        _write_all(fd, data)
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):  # a part written before a full disk said no
            os.unlink(path)
        raise
    os.close(fd)


# Measurements only (`lakelog perf commit`): whether directories are synced. Never a user setting.
_sync_directories = True


@contextlib.contextmanager
def unsynced_directories() -> Iterator[None]:
    """Skip directory syncs while inside: the "without" side of ``lakelog perf commit``'s
    directory-sync figure (benchmarks/commit.py), never for anything a user runs, since an
    acknowledged commit may then not survive a power loss. File syncs are unchanged."""
    global _sync_directories
    _sync_directories = False
    try:
        yield
    finally:
        _sync_directories = True


def sync_directory(path: str) -> None:
    """fsync the local directory ``path``, so the entries created in it (a linked commit file,
    a new data file or subdirectory) survive a power loss.

    A file's own fsync does not make its name durable: the name is data of the
    directory (fsync(2): "Calling fsync() does not necessarily ensure that the
    entry in the directory containing the file has also reached disk. For that
    an explicit fsync() on a file descriptor for the directory is also
    needed."). Kafka (``Utils.flushDir`` after creating a segment or renaming
    a file), etcd (``fileutil.Fsync`` of the WAL directory) and SQLite
    (``unixSync`` of the directory after creating a journal) do the same.
    Raises OSError.
    """
    if not _sync_directories:
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_all(files: Sequence[str], directories: Sequence[str], *, meanwhile: Callable[[], None] | None = None) -> None:
    """fsync local ``files`` and ``directories`` (each name a directory holds; skipped inside
    :func:`unsynced_directories`), all at once. Raises the first OSError after every sync
    finished. ``meanwhile()`` runs on the calling thread while they are in flight (also when
    there is nothing to sync); what it raises is raised after them.

    Issued together, the syncs share one journal commit and one disk cache flush
    on a journaling file system (ext4's jbd2 and XFS batch concurrent fsyncs into
    one commit; a directory synced after its file was would flush the disk cache
    a second time). Safe because nothing references the files before this
    returns: a crash in between leaves at most an unreferenced file. The syncs run
    on threads of their own outside the interpreter lock (:mod:`parallel_sync`).
    """
    directories = list(directories) if _sync_directories else []
    paths = [*files, *directories]
    for path, error in zip(paths, sync_paths(list(files), directories, meanwhile), strict=True):
        if error:
            raise OSError(error, os.strerror(error), path)


def make_directories(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)`` for a local path, durably: the parent of every
    directory it creates is synced (:func:`sync_directory`), up to the parent of the topmost
    one, so a file later created and synced inside is reachable after a power loss.
    Directories that already existed are left as they are. Raises OSError."""
    created = []
    probe = os.path.abspath(path)
    while not os.path.isdir(probe):
        created.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if not created:
        return
    os.makedirs(path, exist_ok=True)
    for directory in reversed(created):  # the topmost new directory's parent first
        sync_directory(os.path.dirname(directory))


# S3 answers 409 ConditionalRequestConflict when a conditional write races
# another write of the same key still in progress; AWS says to retry.
_CONFLICT_RETRIES = 5


def _s3_put_if_absent(settings: S3Settings, bucket: str, key: str, data: bytes) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    client = _s3_client(settings)
    write_id = new_uuid().hex
    for attempt in range(_CONFLICT_RETRIES + 1):
        try:
            client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*", Metadata={WRITE_ID_KEY: write_id})
            return True
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = exc.response.get("Error", {}).get("Code")
            if status == 412 or code == "PreconditionFailed":
                # botocore retries a PUT whose response was lost; the retry then
                # meets the object its first attempt created.
                return _owner_is(client, bucket, key, write_id) is True
            if status == 409 and attempt < _CONFLICT_RETRIES:
                time.sleep(0.05 * (attempt + 1))
                continue
            if status is not None and 400 <= status < 500:
                raise OSError(f"s3://{bucket}/{key}: {code}: {exc}") from exc
            return _resolve_unknown(client, bucket, key, write_id, exc)
        except BotoCoreError as exc:  # connection reset, read timeout, ...
            return _resolve_unknown(client, bucket, key, write_id, exc)
    raise OSError(f"s3://{bucket}/{key}: conditional write kept conflicting (409) {_CONFLICT_RETRIES + 1} times")


def _owner_is(client: Any, bucket: str, key: str, write_id: str) -> bool | None:
    """True if ``key`` holds our write, False if somebody else's, None if no object is there."""
    from botocore.exceptions import ClientError

    try:
        head = client.head_object(Bucket=bucket, Key=key)
    except ClientError as exc:
        if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
            return None
        raise
    return head.get("Metadata", {}).get(WRITE_ID_KEY) == write_id


def _resolve_unknown(client: Any, bucket: str, key: str, write_id: str, cause: BaseException) -> bool:
    """A PUT failed without saying whether it landed: look."""
    try:
        owner = _owner_is(client, bucket, key, write_id)
    except Exception as exc:
        raise CommitStateUnknownError(
            f"writing s3://{bucket}/{key} failed ({cause}) and it could not be read back ({exc}); "
            "re-read the log before retrying"
        ) from cause
    if owner is None:
        # A request still in flight could land later: not "nothing committed".
        raise CommitStateUnknownError(
            f"writing s3://{bucket}/{key} failed ({cause}); it is absent now but the request may still land"
        ) from cause
    return owner
