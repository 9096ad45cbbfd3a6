"""The real vocabularies, test vectors and chat templates the model families are built from, fetched offline-first.

No model hub is reachable, but the llama-cpp-python source distribution vendors llama.cpp's ``models/`` folder:
vocab-only GGUF files (``ggml-vocab-*.gguf``), llama.cpp's tokenizer test vectors for each (``.inp``/``.out``)
and about 80 real chat templates (``templates/*.jinja``). This module gets that sdist once into
``<cache>/sources`` (``<cache>`` is ``TOKENSPEC_CACHE`` or ``~/.cache/tokenspec``), checks its sha256, and
extracts only the members the families need. Later calls find the files in place and touch nothing.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tokenspec.core.errors import UsageError
from tokenspec.core.progress import step
from tokenspec.harness.processes import cache_dir

__all__ = [
    "LLAMA_CPP_PYTHON_VERSION",
    "SourceError",
    "ensure_sources",
    "models_dir",
    "source_file",
    "sources_dir",
    "template_path",
    "vocab_test_vectors",
]

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
SDIST_NAME = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
#: sha256 of the sdist this code was written against: a different file would mean different vocabularies.
SDIST_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
#: Where llama.cpp's models/ folder sits inside the sdist (and, extracted, under the sources folder).
MODELS_PREFIX = f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}/vendor/llama.cpp/models/"

#: The vocabularies the families read, each with llama.cpp's test vectors.
VOCABULARIES = ("qwen2", "llama-bpe", "gemma-4")


class SourceError(UsageError):
    """The sources could not be downloaded or extracted; the message says what to do."""


def sources_dir() -> Path:
    return cache_dir() / "sources"


def models_dir() -> Path:
    """The extracted llama.cpp ``models/`` folder (it may not exist yet: see ``ensure_sources``)."""
    return sources_dir() / MODELS_PREFIX.rstrip("/")


def _wanted(relative: str) -> bool:
    """Whether a path relative to ``models/`` is extracted: the families' vocabularies and test vectors, and
    every chat template (small, and other families may want them)."""
    if relative.startswith("templates/"):
        rest = relative[len("templates/"):]
        return rest.endswith(".jinja") and "/" not in rest
    return any(relative in (f"ggml-vocab-{v}.gguf", f"ggml-vocab-{v}.gguf.inp", f"ggml-vocab-{v}.gguf.out")
               for v in VOCABULARIES)


def _required() -> list[str]:
    return [f"ggml-vocab-{v}.gguf{ext}" for v in VOCABULARIES for ext in ("", ".inp", ".out")]


def _complete() -> bool:
    folder = models_dir()
    return all((folder / name).is_file() for name in _required()) and (folder / "templates").is_dir()


def ensure_sources() -> Path:
    """Return the extracted ``models/`` folder, downloading and extracting the sdist first when needed."""
    if _complete():
        return models_dir()
    sdist = sources_dir() / SDIST_NAME
    if not sdist.is_file():
        _download(sdist)
    _check_sha256(sdist)
    _extract(sdist)
    if not _complete():
        missing = [name for name in _required() if not (models_dir() / name).is_file()]
        raise SourceError(f"{sdist} does not hold {', '.join(missing)} under {MODELS_PREFIX}")
    return models_dir()


def _download(sdist: Path) -> None:
    sdist.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d"]
    with step(f"downloading the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist (real vocabularies and chat "
              f"templates) into {sdist.parent}", expect="first run only: 77 MB"):
        # pip writes into a private folder first, so an interrupted download never leaves a partial sdist behind.
        with tempfile.TemporaryDirectory(dir=sdist.parent, prefix=".download-") as tmp:
            done = subprocess.run([*command, tmp], capture_output=True, text=True)
            fetched = Path(tmp) / SDIST_NAME
            if done.returncode != 0 or not fetched.is_file():
                tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-2:])
                raise SourceError(
                    f"could not download llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} (sdist) with pip: {tail}; "
                    f"put {SDIST_NAME} into {sdist.parent} by hand"
                )
            os.replace(fetched, sdist)


def _check_sha256(sdist: Path) -> None:
    digest = hashlib.sha256()
    with open(sdist, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    if digest.hexdigest() != SDIST_SHA256:
        raise SourceError(f"{sdist} has sha256 {digest.hexdigest()}, not the expected {SDIST_SHA256}: "
                          "delete it and build again to download it afresh")


def _extract(sdist: Path) -> None:
    """Write the wanted members (regular files only, names checked) atomically into the sources folder."""
    root = sources_dir().resolve()
    with step(f"extracting vocabularies and chat templates from {sdist.name}"):
        try:
            with tarfile.open(sdist, "r:gz") as tar:
                for member in tar:
                    if not member.isfile() or not member.name.startswith(MODELS_PREFIX):
                        continue
                    relative = member.name[len(MODELS_PREFIX):]
                    if not _wanted(relative) or ".." in relative.split("/"):
                        continue
                    target = (root / member.name).resolve()
                    if root not in target.parents:
                        continue
                    source = tar.extractfile(member)
                    assert source is not None
                    target.parent.mkdir(parents=True, exist_ok=True)
                    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
                    tmp.write_bytes(source.read())
                    os.replace(tmp, target)
        except (OSError, tarfile.TarError) as exc:
            raise SourceError(f"cannot extract {sdist}: {exc}; delete it and build again") from exc


def source_file(relative: str) -> Path:
    """A file under llama.cpp's ``models/`` folder (e.g. ``ggml-vocab-qwen2.gguf``), fetched when absent."""
    path = ensure_sources() / relative
    if not path.is_file():
        raise SourceError(f"{path} does not exist in llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}'s models/ folder")
    return path


def template_path(name: str) -> Path:
    """A vendored chat template, e.g. ``Qwen-Qwen3-0.6B.jinja``."""
    return source_file(f"templates/{name}")


def vocab_test_vectors(vocabulary: str) -> list[tuple[str, list[int]]]:
    """llama.cpp's tokenizer test vectors for ``ggml-vocab-<vocabulary>.gguf``: (input text, expected ids).

    The ``.inp`` file holds the inputs, each followed by a line ``__ggml_vocab_test__``; the ``.out`` file holds
    one line per input with the expected ids separated by spaces (no BOS: llama.cpp's test tokenizes without
    adding special tokens).
    """
    marker = "\n__ggml_vocab_test__\n"
    inp = source_file(f"ggml-vocab-{vocabulary}.gguf.inp").read_bytes().decode("utf-8")
    out = source_file(f"ggml-vocab-{vocabulary}.gguf.out").read_bytes().decode("utf-8")
    texts = inp.split(marker)
    if texts and texts[-1] == "":
        texts.pop()
    ids = [[int(t) for t in line.split()] for line in out.split("\n")]
    if ids and ids[-1] == [] and len(ids) == len(texts) + 1:
        ids.pop()
    if len(texts) != len(ids):
        raise SourceError(f"ggml-vocab-{vocabulary}: {len(texts)} inputs but {len(ids)} expected outputs")
    return list(zip(texts, ids, strict=True))
