"""Flax NNX encoders that expose what explainers need (design §1).

Text (BERT / MiniLM, ELECTRA, RoBERTa / XLM-R) and ViT encoders returning hidden states,
pre-softmax attention logits and the embeddings gradient explainers differentiate;
pooling + classification / regression heads; Hugging Face checkpoint loading; a pure
``split`` / ``apply`` view for ``jax.grad``.
"""

from smat.models import functional as functional
from smat.models.heads import ClassifierOutput as ClassifierOutput
from smat.models.heads import ScalarMix as ScalarMix
from smat.models.heads import SequenceClassifier as SequenceClassifier
from smat.models.heads import cls_pool as cls_pool
from smat.models.heads import masked_mean as masked_mean
from smat.models.hub import from_pretrained as from_pretrained
from smat.models.hub import keep_first_layers as keep_first_layers
from smat.models.hub import minilm_path as minilm_path
from smat.models.layers import EncoderOutput as EncoderOutput
from smat.models.layers import pool_attention_logits as pool_attention_logits
from smat.models.source import ModelSource as ModelSource
from smat.models.text import TextConfig as TextConfig
from smat.models.text import TextEncoder as TextEncoder
from smat.models.vision import ViTConfig as ViTConfig
from smat.models.vision import ViTEncoder as ViTEncoder

__all__ = [
    "ClassifierOutput",
    "EncoderOutput",
    "ModelSource",
    "ScalarMix",
    "SequenceClassifier",
    "TextConfig",
    "TextEncoder",
    "ViTConfig",
    "ViTEncoder",
    "cls_pool",
    "from_pretrained",
    "keep_first_layers",
    "functional",
    "masked_mean",
    "minilm_path",
    "pool_attention_logits",
]
