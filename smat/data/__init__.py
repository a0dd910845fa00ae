"""smat.data: data sets, tokenization, seeded splits, batching and rationale alignment.

Data flows: a source (`load_dataset` for any Hugging Face `datasets` source, `load_corpus` for
the built-in offline corpora, `load_eraser` / `load_mlqe` for data with human word-level
annotations) -> `TextDataset` -> split indices (`train_validation_test_split`, `smat_split`,
`student_split`, `teacher_split`) -> `TextDataset.select` -> `tokenize` -> `Encoded` numpy arrays ->
`iterate_batches` (or, split into per-process data shards, `DataShards` -> `epoch_batches`).
`rationales` aligns word / character annotations with sub-word tokens.
Images: `load_images` (class folders, `.npz`, Hugging Face) -> `ImageDataset` ->
`preprocess_images` (a ViT's input size and normalisation), or `PatchLayout.encode` ->
`Encoded` patch tokens that the training path moves as it moves token rows.
"""

from smat.data.batching import DataShards as DataShards
from smat.data.batching import batches_by_length as batches_by_length
from smat.data.batching import batches_per_epoch as batches_per_epoch
from smat.data.batching import epoch_batches as epoch_batches
from smat.data.batching import epoch_order as epoch_order
from smat.data.batching import iterate_batches as iterate_batches
from smat.data.batching import length_sorted_batches as length_sorted_batches
from smat.data.batching import num_batches as num_batches
from smat.data.batching import owned_shards as owned_shards
from smat.data.batching import padded_length as padded_length
from smat.data.batching import rounded_length as rounded_length
from smat.data.batching import shard_positions as shard_positions
from smat.data.batching import split_size as split_size
from smat.data.batching import take as take
from smat.data.corpus import available_corpora as available_corpora
from smat.data.corpus import load_corpus as load_corpus
from smat.data.dataset import RationaleDataset as RationaleDataset
from smat.data.dataset import TextDataset as TextDataset
from smat.data.dataset import encode_labels as encode_labels
from smat.data.eraser import load_eraser as load_eraser
from smat.data.images import ImageDataset as ImageDataset
from smat.data.images import PatchLayout as PatchLayout
from smat.data.images import is_image_source as is_image_source
from smat.data.images import load_images as load_images
from smat.data.images import patch_tokens as patch_tokens
from smat.data.images import pixels_of_patch_tokens as pixels_of_patch_tokens
from smat.data.images import preprocess as preprocess_images
from smat.data.mlqe import load_mlqe as load_mlqe
from smat.data.rationales import char_spans_to_token_mask as char_spans_to_token_mask
from smat.data.rationales import pad_word_masks as pad_word_masks
from smat.data.rationales import spans_to_word_mask as spans_to_word_mask
from smat.data.rationales import token_word_ids as token_word_ids
from smat.data.rationales import word_mask_to_token_mask as word_mask_to_token_mask
from smat.data.rationales import word_scores as word_scores
from smat.data.sources import load_dataset as load_dataset
from smat.data.splits import ProtocolSplits as ProtocolSplits
from smat.data.splits import Splits as Splits
from smat.data.splits import StudentSplits as StudentSplits
from smat.data.splits import TeacherSplits as TeacherSplits
from smat.data.splits import smat_split as smat_split
from smat.data.splits import student_split as student_split
from smat.data.splits import students_from_teacher_rows as students_from_teacher_rows
from smat.data.splits import teacher_split as teacher_split
from smat.data.splits import train_validation_test_split as train_validation_test_split
from smat.data.tokenization import Encoded as Encoded
from smat.data.tokenization import TokenizeStats as TokenizeStats
from smat.data.tokenization import TruncationWarning as TruncationWarning
from smat.data.tokenization import shuffled_tokens as shuffled_tokens
from smat.data.tokenization import tokenize as tokenize
from smat.data.tokenization import tokenize_texts as tokenize_texts
from smat.data.tokenization import tokenize_with_stats as tokenize_with_stats

__all__ = [
    "DataShards",
    "Encoded",
    "ImageDataset",
    "PatchLayout",
    "ProtocolSplits",
    "RationaleDataset",
    "Splits",
    "StudentSplits",
    "TeacherSplits",
    "TextDataset",
    "TokenizeStats",
    "TruncationWarning",
    "available_corpora",
    "batches_by_length",
    "batches_per_epoch",
    "char_spans_to_token_mask",
    "encode_labels",
    "epoch_batches",
    "epoch_order",
    "iterate_batches",
    "length_sorted_batches",
    "load_corpus",
    "load_dataset",
    "load_eraser",
    "is_image_source",
    "load_images",
    "load_mlqe",
    "num_batches",
    "owned_shards",
    "pad_word_masks",
    "padded_length",
    "patch_tokens",
    "pixels_of_patch_tokens",
    "preprocess_images",
    "rounded_length",
    "shard_positions",
    "shuffled_tokens",
    "smat_split",
    "spans_to_word_mask",
    "split_size",
    "student_split",
    "students_from_teacher_rows",
    "teacher_split",
    "take",
    "token_word_ids",
    "tokenize",
    "tokenize_texts",
    "tokenize_with_stats",
    "train_validation_test_split",
    "word_mask_to_token_mask",
    "word_scores",
]
