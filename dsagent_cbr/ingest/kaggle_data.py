"""Download a Kaggle competition's data files (for `cbr tasks new --kaggle SLUG`): the zip of all files
through the v1 API with the same credentials as `cbr ingest-kaggle`, unpacked flat into a folder.

A redirect (Kaggle answers with one to its file storage) is followed without our credentials; only
plain files are unpacked, under their base names, so a zip cannot write outside the folder."""

from __future__ import annotations

import io
import shutil
import urllib.error
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

from dsagent_cbr.errors import CbrError
from dsagent_cbr.ingest.kaggle_api import (
    api_base,
    basic_auth,
    competition_files_url,
    load_credentials,
    status_reason,
)

MAX_BYTES = 4 * 2**30
TIMEOUT = 120.0


class _Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None  # the redirect comes back as an HTTPError, to be followed without credentials


def _fetch(url: str, target: Path, auth: str | None, what: str) -> str | None:
    """Stream `url` into `target`; the Location of a redirect instead, if the server answers with one."""
    headers = {"User-Agent": "dsagent-cbr"} | ({"Authorization": auth} if auth else {})
    opener = urllib.request.build_opener(_Stay)
    try:
        with (
            opener.open(urllib.request.Request(url, headers=headers), timeout=TIMEOUT) as response,
            target.open("wb") as out,
        ):
            copied = 0
            while chunk := response.read(1 << 20):
                copied += len(chunk)
                if copied > MAX_BYTES:
                    raise CbrError(
                        f"{what} is larger than {MAX_BYTES / 2**30:.0f} GB; download it yourself."
                    )
                out.write(chunk)
    except urllib.error.HTTPError as exc:
        if exc.code in (301, 302, 303, 307, 308) and exc.headers.get("Location"):
            return urllib.request.urljoin(url, exc.headers["Location"])
        raise CbrError(status_reason(exc.code, what) + ".") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise CbrError(f"Cannot reach Kaggle for {what}: {getattr(exc, 'reason', exc)}.") from exc
    return None


def _unpack(archive: Path, folder: Path) -> list[str]:
    """Plain files of the zip, flat, by base name; CSVs zipped inside it unpacked too."""
    try:
        outer = zipfile.ZipFile(archive)
    except zipfile.BadZipFile as exc:
        raise CbrError("Kaggle's download is not a zip archive.") from exc
    written = []
    with outer:
        for info in outer.infolist():
            name = PurePosixPath(info.filename).name
            if info.is_dir() or not name or name.startswith("."):
                continue
            data = outer.read(info)
            if name.endswith(".zip"):
                with zipfile.ZipFile(io.BytesIO(data)) as inner:
                    for member in inner.infolist():
                        base = PurePosixPath(member.filename).name
                        if not member.is_dir() and base.endswith(".csv"):
                            (folder / base).write_bytes(inner.read(member))
                            written.append(base)
                continue
            (folder / name).write_bytes(data)
            written.append(name)
    return written


def download_competition(slug: str, scratch: Path, environ: dict[str, str] | None = None) -> Path:
    """The competition's files unpacked in scratch/<slug>/; raises CbrError with one sentence."""
    username, key = load_credentials(environ)
    base = api_base(environ)
    folder = scratch / slug
    folder.mkdir(parents=True, exist_ok=True)
    archive = scratch / f"{slug}.zip"
    what = f"the data files of competition {slug}"
    location = _fetch(competition_files_url(base, slug), archive, basic_auth(username, key), what)
    if location is not None and _fetch(location, archive, None, what) is not None:
        raise CbrError(f"Kaggle redirected the download of {what} more than once.")
    names = _unpack(archive, folder)
    archive.unlink()
    if not names:
        shutil.rmtree(folder)
        raise CbrError(f"Kaggle's zip for {slug} holds no files.")
    return folder
