"""A Docker build context as files and one content digest.

The digest names the image tag, so an unchanged folder never rebuilds and any changed byte does: a file Docker
sends must be in it. `.dockerignore` is therefore read the way Docker reads it, in moby/patternmatcher's
semantics (v0.6.1; BuildKit's context walker, tonistiigi/fsutil filter.go, asks it per path with its parent's
results): ``*`` and ``?`` stay within one path segment, ``**`` spans any number of them, ``[...]`` is a character
class, ``\\`` escapes; a leading ``/`` is dropped; patterns apply in order and a ``!`` pattern re-includes. A
pattern matching a folder matches everything under it. tests/fixtures/dockerignore/cases.json holds the answers of
moby/patternmatcher itself (scripts/derive_dockerignore_cases.py), and tests/test_build_context.py holds this port
to them.

`az acr build` (build mode ``acr``, for a machine without Docker) packs the context with the Azure CLI's own reader
instead (Azure/azure-cli, src/azure-cli/azure/cli/command_modules/acr/_archive_utils.py: ``_load_dockerignore_file``
and ``IgnoreRule``): it strips only the line's end (``line.rstrip()``), and drops a leading ``/`` and trailing ``/``
only from ``!`` lines, with no path cleaning. So ``/build``, ``build/`` and ``  tmp`` exclude nothing there while Docker
excludes them, and a changed file there would be uploaded and built without a new tag. A line the two read as
different patterns is refused (``az_disagreement``), naming the form both read alike. Both always build with the
Dockerfile (az adds it to the archive whatever the .dockerignore says), so it is always in the digest, and so is the
.dockerignore, which decides what else is.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

PROJECT_ROOT = Path(__file__).resolve().parents[2]
STAGING = ".image-contexts"
"""Where ``stage`` copies each context for the build, under the project root (gitignored)."""
FILE_MODES = {False: 0o644, True: 0o755}
"""A staged file's permissions, by its executable bit: the only bit git records, and the only one the tag holds."""


def read_ignore(text: str) -> list[str]:
    """The patterns of a .dockerignore, as moby/patternmatcher's ignorefile.ReadAll returns them: a BOM dropped,
    ``#`` lines skipped, each line trimmed and cleaned (Go's path.Clean), a leading ``/`` dropped, ``!`` kept."""
    patterns = []
    for line in text.removeprefix("\ufeff").splitlines():
        if line.startswith("#") or not (line := line.strip()):
            continue
        invert = line.startswith("!")
        pattern = line[1:].strip() if invert else line
        if pattern:
            pattern = _clean(pattern)
            pattern = pattern[1:] if len(pattern) > 1 and pattern.startswith("/") else pattern
        patterns.append("!" + pattern if invert else pattern)
    return patterns


def _clean(path: str) -> str:
    """Go's path.Clean: POSIX normpath, except that Go folds a leading ``//`` into ``/`` as well."""
    return posixpath.normpath("/" + path.lstrip("/") if path.startswith("/") else path)


def _check_syntax(pattern: str) -> None:
    """Refuse what Go's filepath.Match refuses (ErrBadPattern): an unclosed or empty ``[...]``, a ``-`` without
    both ends, a trailing ``\\``. Docker refuses such a .dockerignore; so does this."""
    i, n = 0, len(pattern)

    def char(at: int) -> int:  # one class character (escaped or not); the index after it
        if at >= n or pattern[at] in "-]":
            raise ValueError
        if pattern[at] == "\\":
            at += 1
            if at >= n:
                raise ValueError
        return at + 1

    try:
        while i < n:
            if pattern[i] == "\\":
                if i + 1 >= n:
                    raise ValueError
                i += 2
            elif pattern[i] == "[":
                i += 1
                if i < n and pattern[i] == "^":
                    i += 1
                first = True
                while first or (i < n and pattern[i] != "]"):
                    first = False
                    i = char(i)
                    if i < n and pattern[i] == "-":
                        i = char(i + 1)
                if i >= n:
                    raise ValueError
                i += 1
            else:
                i += 1
    except ValueError:
        raise ValueError(f".dockerignore pattern {pattern!r} is malformed (Go's filepath.Match syntax)") from None


_REGEX_SPECIAL = set(".+()|{}$")
"""Characters escaped in the translated regexp: special there, plain in a pattern (patternmatcher's shouldEscape)."""


class _Pattern:
    """One pattern, translated as patternmatcher's Pattern.compile does: an exact, prefix (``dir/**``) or suffix
    (``**/name``) comparison where that suffices, a regular expression otherwise."""

    def __init__(self, pattern: str):
        self.exclusion = pattern.startswith("!")
        self.text = pattern[1:] if self.exclusion else pattern
        _check_syntax(self.text)
        regex, kind, i, text = "^", "exact", 0, self.text
        while i < len(text):
            ch = text[i]
            if ch == "*" and text[i + 1:i + 2] == "*":
                start, i = i, i + 2
                if text[i:i + 1] == "/":  # "**/" is "**"
                    i += 1
                if i >= len(text):  # "**" at the end: everything
                    kind, regex = ("prefix", regex) if kind == "exact" else ("regex", regex + ".*")
                else:
                    kind, regex = "regex", regex + "(.*/)?"
                if start == 0:
                    kind = "suffix"
                continue
            if ch == "*":
                kind, regex = "regex", regex + "[^/]*"
            elif ch == "?":
                kind, regex = "regex", regex + "[^/]"
            elif ch in _REGEX_SPECIAL:
                regex += "\\" + ch
            elif ch == "\\":
                if i + 1 < len(text):
                    i += 1
                    kind, regex = "regex", regex + "\\" + text[i]
                else:
                    regex += "\\"
            elif ch in "[]":
                kind, regex = "regex", regex + ch
            else:
                regex += ch
            i += 1
        self.kind = kind
        try:
            self.regex = re.compile(regex + "$") if kind == "regex" else None
        except re.error as error:  # e.g. a reversed range [z-a], which Docker refuses when it first matches
            raise ValueError(f".dockerignore pattern {self.text!r} is malformed ({error})") from None

    def matches(self, path: str) -> bool:
        if self.kind == "exact":
            return path == self.text
        if self.kind == "prefix":
            return path.startswith(self.text[:-2])
        if self.kind == "suffix":
            suffix = self.text[2:]
            return path.endswith(suffix) or (suffix.startswith("/") and path == suffix[1:])
        assert self.regex is not None
        return self.regex.fullmatch(path) is not None


class DockerIgnore:
    """A .dockerignore's patterns, deciding which paths stay out of the context."""

    def __init__(self, patterns: list[str]):
        self.patterns = []
        for pattern in (p.strip() for p in patterns):
            if not pattern:
                continue
            pattern = _clean(pattern)
            if pattern == "!":
                raise ValueError('.dockerignore pattern "!" excludes nothing: name what to re-include')
            self.patterns.append(_Pattern(pattern))

    @classmethod
    def read(cls, text: str) -> DockerIgnore:
        return cls(read_ignore(text))

    def _step(self, path: str, parent: list[bool] | None) -> tuple[bool, list[bool]]:
        """patternmatcher's MatchesUsingParentResults: whether ``path`` is excluded, and which patterns matched it
        (a pattern that matched the parent folder matches the path)."""
        excluded, matched = False, []
        for i, pattern in enumerate(self.patterns):
            hit = bool(parent and parent[i])
            if not hit:
                if pattern.exclusion != excluded:
                    matched.append(False)
                    continue
                hit = pattern.matches(path)
            matched.append(hit)
            if hit:
                excluded = not pattern.exclusion
        return excluded, matched

    def excludes(self, path: str) -> bool:
        """Whether ``path`` (relative, POSIX) stays out of the context, deciding each of its folders first as the
        walk into it does."""
        parts = _clean(path).split("/")
        parent: list[bool] | None = None
        excluded = False
        for depth in range(1, len(parts) + 1):
            excluded, parent = self._step("/".join(parts[:depth]), parent)
        return excluded


def _az_rule(line: str) -> str | None:
    """The pattern azure-cli's ``_load_dockerignore_file`` and ``IgnoreRule`` read from one .dockerignore line
    (``!`` kept); None for a line it skips (empty or ``#``)."""
    rule = line.rstrip()
    if not rule or rule.startswith("#"):
        return None
    if not rule.startswith("!"):
        return rule
    rule = rule[1:]
    return "!" + (rule[1:] if rule.startswith("/") else rule).rstrip("/")


def az_disagreement(text: str) -> str | None:
    """One line naming the first .dockerignore line that Docker (moby's ReadAll) and ``az acr build`` read as
    different patterns, and the form both read alike; None when they agree on every line."""
    for line in text.removeprefix("\ufeff").splitlines():
        docker = next(iter(read_ignore(line)), None)
        az = _az_rule(line)
        if docker != az:
            return (f".dockerignore pattern {line!r}: Docker reads {docker!r} but az acr build reads {az!r} (it "
                    f"keeps leading spaces and a leading or trailing '/' on an exclusion); write {docker!r}")
    return None


@dataclass(frozen=True)
class BuildContext:
    directory: str
    """The context folder, relative to the project root (what ``pulumi up`` runs in)."""
    files: tuple[str, ...]
    """Files sent to the builder, relative POSIX paths, sorted."""
    digest: str
    """sha256 over every file's path, executable bit and content, and over the .dockerignore."""

    @property
    def tag(self) -> str:
        """An immutable, content-derived image tag."""
        return self.digest[:16]

    @property
    def path(self) -> Path:
        return PROJECT_ROOT / self.directory


def load_context(directory: str) -> BuildContext:
    """Read the context folder ``directory`` (relative to the project root)."""
    root = PROJECT_ROOT / directory
    if not (root / "Dockerfile").is_file():
        raise FileNotFoundError(f"build context {directory}: no Dockerfile")
    ignore_file = root / ".dockerignore"
    ignore_text = ignore_file.read_text(encoding="utf-8") if ignore_file.is_file() else ""
    if problem := az_disagreement(ignore_text):
        raise ValueError(f"build context {directory}: {problem}")
    ignore = DockerIgnore.read(ignore_text)
    files = tuple(sorted({"Dockerfile"} | {
        path.relative_to(root).as_posix()
        for path in root.rglob("*")
        if path.is_file() and not ignore.excludes(path.relative_to(root).as_posix())
    }))
    digest = hashlib.sha256()
    digest.update(f".dockerignore\0{hashlib.sha256(ignore_text.encode()).hexdigest()}\0".encode())
    for name in files:
        source = root / name
        digest.update(f"{name}\0{int(bool(source.stat().st_mode & 0o111))}\0".encode())
        digest.update(hashlib.sha256(source.read_bytes()).digest())
    return BuildContext(directory=directory, files=files, digest=digest.hexdigest())


def stage(context: BuildContext) -> str:
    """Copy the context's files into ``STAGING/<directory>`` with fixed permissions, remove anything else there, and
    return that folder relative to the project root: what the build reads.

    pulumi-docker hashes every file's full permission bits into the Image's ``build.contextDigest`` and rebuilds when
    it changes (pulumi/pulumi-docker provider/provider.go:591, ``fileMode.String()``), and Docker's COPY keeps the bits
    in the image. A checkout's bits follow the umask of whoever cloned it (git records only the executable bit): a
    desktop's 002 gives 0664, CI's 022 gives 0644, so one commit deployed from both would build and roll its pods
    (and rerun its Jobs) on every switch. The copy holds exactly the files the tag covers, at 0644, or 0755 where the
    executable bit is set: one tag is one build input on every machine. A file is written beside the folder and
    renamed into place, so renders running side by side never see a half-written file; an unchanged file is left as
    it is."""
    if Path(context.directory).is_absolute():
        raise ValueError(f"build context {context.directory}: stage a folder of the project (a relative path)")
    source = context.path
    root = PROJECT_ROOT / STAGING
    target = root / context.directory
    target.mkdir(parents=True, exist_ok=True)
    for name in context.files:
        data = (source / name).read_bytes()
        mode = FILE_MODES[bool((source / name).stat().st_mode & 0o111)]
        path = target / name
        if path.is_file() and path.stat().st_mode & 0o7777 == mode and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=root, prefix=".staging-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    wanted = set(context.files)
    folders = {str(parent) for name in wanted for parent in PurePosixPath(name).parents} - {"."}
    for path in sorted(target.rglob("*"), reverse=True):  # what a folder holds before the folder
        name = path.relative_to(target).as_posix()
        if path.is_dir() and not path.is_symlink():
            if name in folders:
                path.chmod(0o755)
            elif not any(path.iterdir()):
                path.rmdir()
        elif name not in wanted:
            path.unlink(missing_ok=True)
    target.chmod(0o755)
    return f"{STAGING}/{context.directory}"
