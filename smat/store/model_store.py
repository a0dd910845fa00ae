"""Trained models on disk: architecture + head description (JSON), tokenizer, orbax params.

A trained-model folder is self-describing, so ``smat predict --model DIR`` or a student
run needs nothing but the folder:

    DIR/model.json    encoder config, task, num_labels, pooling, label names, max_len,
                      the parameters' fingerprint
    DIR/tokenizer/    the transformers tokenizer (text models)
    DIR/params/       orbax checkpoint of the parameters (exact round trip)

:func:`first_layers_checkpoint` writes the other kind of folder a run starts from: a
pretrained Hugging Face checkpoint cut to its first layers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import nnx

from smat.data import Encoded, tokenize_texts
from smat.json_files import read_json, recorded_dataclass
from smat.models import SequenceClassifier, TextConfig, ViTConfig, functional
from smat.models.hub import read_config, read_safetensors
from smat.store import checkpoint
from smat.store.run_log import write_json_atomic

_CONFIG_TYPES = {"text": TextConfig, "vit": ViTConfig}


class TrainedModel(NamedTuple):
    """A restored model: the NNX module, its tokenizer (None for ViT) and its description."""

    model: SequenceClassifier
    tokenizer: Any
    info: dict[str, Any]


def describe(model: SequenceClassifier, **extra: Any) -> dict[str, Any]:
    """The JSON-able description of `model` that :func:`load` rebuilds it from."""
    config = model.encoder.config
    kind = next(name for name, cls in _CONFIG_TYPES.items() if isinstance(config, cls))
    return {"encoder": kind, "encoder_config": dataclasses.asdict(config), "task": model.task,
            "num_labels": model.num_labels, "pooling": model.pooling,
            # recorded only when not the default one-layer head: older folders read as it
            **({"head": model.head} if model.head != "linear" else {}), **extra}


def save(path: str | Path, model: SequenceClassifier, tokenizer: Any, *,
         params: nnx.State | None = None, **extra: Any) -> Path:
    """Save `model` (or `model` with `params` swapped in) as a trained-model folder.

    Args:
      path: destination folder (created; an existing model there is replaced).
      model: the module (its structure, and its parameters unless `params` is given).
      tokenizer: a transformers tokenizer or None.
      params: parameters to store instead of the module's own (e.g. the best ones).
      **extra: JSON-able facts kept in model.json (label_names, max_len, metrics, ...).

    Returns:
      The folder path.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if params is None:
        params = functional.split(model)[1]
    checkpoint.save(path / "params", params, metadata={}, overwrite=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(str(path / "tokenizer"))
    write_json_atomic(path / "model.json", describe(
        model, params_fingerprint=params_fingerprint(params), **extra))
    return path


def params_fingerprint(params: nnx.State) -> str:
    """First 16 hex digits of the SHA-256 of every parameter's name, dtype, shape and
    values: it names the trained weights, not the settings that trained them, so a teacher
    trained again with the same settings (on another machine, where float summation order
    can differ) is told apart from the one its students learned from."""
    digest = hashlib.sha256()
    for key, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        value = np.asarray(leaf)
        digest.update(f"{jax.tree_util.keystr(key)} {value.dtype} {value.shape};".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()[:16]


def saved_params_fingerprint(path: str | Path) -> str:
    """The :func:`params_fingerprint` a trained-model folder records, computed from its
    stored parameters for a model saved before it was recorded."""
    recorded = read_json(Path(path) / "model.json").get("params_fingerprint")
    return recorded or params_fingerprint(functional.split(load(path).model)[1])


def encoder_kind(path: str | Path) -> str | None:
    """The encoder kind a trained-model folder records ("text" or "vit"), without loading
    its parameters; None when `path` holds no model.json (:func:`load` then says why)."""
    description = Path(path) / "model.json"
    if not description.is_file():
        return None
    return read_json(description).get("encoder")


def load(path: str | Path, *, precision: str = "float32") -> TrainedModel:
    """Rebuild a model saved by :func:`save`.

    Args:
      path: the trained-model folder.
      precision: "float32" (as trained) or "bfloat16": the parameters are cast, so every
        forward pass, explanation and evaluation of the returned model computes in it
        (:func:`smat.models.functional.cast`).

    Raises:
      FileNotFoundError: `path` is not a trained-model folder (no model.json).
      ValueError: an unknown encoder kind, stored parameters that do not fit the described
        architecture (the checkpoint error names each key and both shapes), or that cannot
        be read or differ from the weights model.json records (a damaged folder).
    """
    path = Path(path)
    if precision not in functional.PRECISIONS:
        raise ValueError(f"precision must be one of {functional.PRECISIONS}, got {precision!r}")
    if not (path / "model.json").is_file():
        raise FileNotFoundError(f"{path} is not a smat trained-model folder (no model.json); "
                                "train one with `smat train-teacher`")
    info = read_json(path / "model.json")
    if info.get("encoder") not in _CONFIG_TYPES:
        raise ValueError(f"{path}/model.json: unknown encoder {info.get('encoder')!r}; expected "
                         f"one of {sorted(_CONFIG_TYPES)}")
    config = recorded_dataclass(_CONFIG_TYPES[info["encoder"]], info["encoder_config"],
                                source=f"{path}/model.json ('encoder_config')")

    def build() -> SequenceClassifier:
        return SequenceClassifier(config, num_labels=info["num_labels"], task=info["task"],
                                  pooling=info["pooling"], head=info.get("head", "linear"),
                                  rngs=nnx.Rngs(0))

    graphdef, abstract = functional.split(nnx.eval_shape(build))
    params, _ = checkpoint.restore(path / "params", target=abstract)
    recorded = info.get("params_fingerprint")
    if recorded is not None and params_fingerprint(params) != recorded:
        raise ValueError(f"the weights in {path / 'params'} are not the ones its model.json "
                         f"records (fingerprint {params_fingerprint(params)}, recorded "
                         f"{recorded}): the folder was changed or damaged since it was saved; "
                         "retrain it (rerun the command that wrote it, with --overwrite)")
    tokenizer = None
    if (path / "tokenizer").is_dir():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path / "tokenizer"))
    params = functional.cast(params, precision)
    # where it was loaded from, so that files its model.json names relative to its folder
    # are found wherever the command runs (not written back)
    return TrainedModel(nnx.merge(graphdef, params), tokenizer,
                        {**info, "loaded_from": str(path.resolve())})


def first_layers_checkpoint(source: str | Path, num_layers: int, folder: Path) -> Path:
    """A Hugging Face checkpoint folder with `source`'s embeddings and first `num_layers`
    blocks: a smaller pretrained encoder that ``run_teacher`` (or any ``--encoder``) starts
    from as from any checkpoint, e.g. the ``small`` preset of ``smat roar`` as a folder
    (:func:`smat.models.hub.keep_first_layers` cuts a model already built). A folder
    already written is reused.

    Raises:
      ValueError: `source` has fewer blocks.
    """
    from safetensors.numpy import save_file

    source = Path(source)
    hf = read_config(source)
    if num_layers > hf["num_hidden_layers"]:
        raise ValueError(f"{source} has {hf['num_hidden_layers']} layers, fewer than "
                         f"{num_layers}")
    if (folder / "model.safetensors").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for path in source.iterdir():
        if path.is_file() and path.suffix != ".safetensors" and path.name != "config.json":
            shutil.copy(path, folder / path.name)
    tensors = {}
    for key, value in read_safetensors(source).items():
        block = re.search(r"(?:^|\.)layer\.(\d+)\.", key)
        if block is None or int(block.group(1)) < num_layers:
            tensors[key] = value
    write_json_atomic(folder / "config.json", {**hf, "num_hidden_layers": num_layers})
    save_file(tensors, str(folder / "tmp.safetensors"))
    (folder / "tmp.safetensors").rename(folder / "model.safetensors")
    return folder


PAIR_SEPARATOR = "\t"
"""What separates the two texts of one example of a text-pair model (premise /
hypothesis, source / translation) on a line of a texts file."""


def encode_texts(trained: TrainedModel, texts: Sequence[str], *, job: str,
                 rows: slice = slice(None)) -> Encoded:
    """Tokenize `texts` with a loaded text model's tokenizer at its max_len (longer texts
    are truncated with one warning). A model trained on text pairs (its data settings
    name a ``text_pair_column``) reads each text as its two parts separated by one tab.
    Only the texts of `rows` are tokenized (a process's block); all are checked.

    Raises:
      ValueError: no texts, a model without a tokenizer (a vision model), or a text of a
        text-pair model without exactly one tab (the message gives its number); `job`
        names what was asked in the message ("predict", "explain").
    """
    if not texts:
        raise ValueError(f"no texts to {job} (the input is empty)")
    if trained.tokenizer is None:
        raise ValueError(f"the model holds no tokenizer ({trained.info.get('encoder')} "
                         f"encoder); {job} takes text models only")
    pair_column = (trained.info.get("data") or {}).get("text_pair_column")
    if pair_column is None:
        return tokenize_texts(list(texts[rows]), trained.tokenizer,
                              max_len=trained.info["max_len"])
    pairs = [text.split(PAIR_SEPARATOR) for text in texts]
    bad = [i + 1 for i, parts in enumerate(pairs) if len(parts) != 2]
    if bad:
        raise ValueError(f"the model reads text pairs (it trained on the pair column "
                         f"{pair_column!r}): write each example as its two texts separated "
                         f"by one tab; text {bad[0]} has {len(pairs[bad[0] - 1]) - 1} tabs"
                         + (f" ({len(bad)} such texts)" if len(bad) > 1 else ""))
    return tokenize_texts([first for first, _ in pairs[rows]], trained.tokenizer,
                          max_len=trained.info["max_len"],
                          text_pairs=[second for _, second in pairs[rows]])
