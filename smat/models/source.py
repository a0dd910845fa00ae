"""Where a model to fine-tune starts: a pretrained encoder (maybe cut to its first layers)
under a fresh head. One config for every command and job that trains from a checkpoint
(``smat train-teacher``, ``smat roar``'s presets, the students a teacher's run rebuilds)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from smat.models.heads import HEADS, POOLINGS, SequenceClassifier
from smat.models.hub import from_config, from_pretrained, keep_first_layers, minilm_path


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A pretrained encoder and how a classifier is built on it.

    Attributes:
      encoder: the pretrained encoder: a checkpoint folder or Hub id, or a model smat
        trained (a folder with model.json: its encoder under a fresh head).
      pooling: how the encoder's states become one vector (scalar_mix: the paper's).
      head: what maps the pooled vector to the logits: one dense layer ("linear"), or the SMaT
        reference's heads with a hidden layer ("electra": GELU, its IMDB / SST-2 models;
        "roberta": tanh, its MLQE model).
      num_layers: keep only the encoder's first N layers, a smaller model for quick runs.
      from_scratch: draw every weight from the seed instead of loading the encoder's: the
        folder's config.json alone says the architecture (a small ViT trained from scratch).
    """

    encoder: str | None = dataclasses.field(default=None, metadata={
        "shown": "the offline all-MiniLM-L6-v2"})
    pooling: str = dataclasses.field(default="scalar_mix", metadata={"choices": POOLINGS})
    head: str = dataclasses.field(default="linear", metadata={"choices": HEADS})
    num_layers: int | None = dataclasses.field(default=None, metadata={"shown": "all"})
    from_scratch: bool = False

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise ValueError(f"ModelSource.pooling must be one of {list(POOLINGS)}; got "
                             f"{self.pooling!r}")
        if self.head not in HEADS:
            raise ValueError(f"ModelSource.head must be one of {list(HEADS)}; got "
                             f"{self.head!r}")
        if self.num_layers is not None and self.num_layers < 1:
            raise ValueError(f"ModelSource.num_layers must be >= 1; got {self.num_layers}")

    @property
    def path(self) -> str:
        """The encoder's folder or Hub id (the offline all-MiniLM-L6-v2 by default)."""
        return str(self.encoder) if self.encoder is not None else str(minilm_path())

    @property
    def name(self) -> str:
        """A short name for tables and cache labels: the encoder folder's (or Hub id's)
        last part."""
        return Path(self.encoder).name if self.encoder is not None else "all-MiniLM-L6-v2"

    def load(self, *, task: str, num_labels: int,
             seed: int) -> tuple[SequenceClassifier, Any]:
        """``(model, tokenizer)``: the pretrained encoder (drawn from `seed` too when
        `from_scratch`), cut to `num_layers`, under a head drawn from `seed`.

        Raises:
          ValueError: as :func:`smat.models.hub.from_pretrained`, or more layers asked for
            than the encoder has (the message names the encoder).
        """
        build = from_config if self.from_scratch else from_pretrained
        model, tokenizer = build(self.path, task=task, num_labels=num_labels,
                                 pooling=self.pooling, head=self.head, seed=seed)
        if self.num_layers is None:
            return model, tokenizer
        try:
            return keep_first_layers(model, self.num_layers, seed=seed), tokenizer
        except ValueError as error:
            raise ValueError(f"--num-layers: {self.path}: {error}") from None

    def settings(self) -> dict[str, Any]:
        """What a run folder records of the model (``head`` only when not "linear",
        ``num_layers`` only when it cuts and ``from_scratch`` only when set, so the records
        of runs on whole pretrained encoders under the default head stay as they were)."""
        return {"model_source": self.path, "pooling": self.pooling,
                **({"head": self.head} if self.head != "linear" else {}),
                **({"num_layers": self.num_layers} if self.num_layers is not None else {}),
                **({"from_scratch": True} if self.from_scratch else {})}

    @classmethod
    def from_settings(cls, recorded: dict[str, Any]) -> ModelSource:
        """The source a run folder's :meth:`settings` record describes."""
        return cls(encoder=recorded["model_source"], pooling=recorded["pooling"],
                   head=recorded.get("head", "linear"),
                   num_layers=recorded.get("num_layers"),
                   from_scratch=recorded.get("from_scratch", False))
