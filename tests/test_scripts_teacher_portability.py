"""Tests for scripts/teacher_portability.py: which XLA flags make a teacher machine-independent."""

import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "teacher_portability",
    Path(__file__).resolve().parents[1] / "scripts" / "teacher_portability.py")
portability = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(portability)


def test_the_fingerprint_is_read_from_the_teacher_only_line():
    output = ("some log line\nteacher /tmp/x/teacher: test accuracy 61.00%, "
              "weights 8251f9cfb647cef7\n")
    assert portability.weights_fingerprint(output) == "8251f9cfb647cef7"
    with pytest.raises(ValueError, match="no weights fingerprint"):
        portability.weights_fingerprint("teacher trained\n")


def test_machines_agree_only_where_every_probing_machine_has_one_fingerprint(tmp_path):
    default, no_threads, avx2 = portability.FLAG_SETS[:3]
    records = {"xeon_a": {"weights": {default: "a" * 16, no_threads: "c" * 16,
                                      avx2: "e" * 16}},
               "epyc_b": {"weights": {default: "b" * 16, no_threads: "c" * 16}}}
    for key, record in records.items():
        (tmp_path / f"{key}.json").write_text(json.dumps(record))
    rows = portability.comparison(portability.load_records(tmp_path)).splitlines()
    assert rows[0] == "| XLA_FLAGS | epyc_b | xeon_a | machines agree |"
    assert rows[2] == f"| `(default)` | {'b' * 16} | {'a' * 16} | no |"
    assert rows[3] == f"| `{no_threads}` | {'c' * 16} | {'c' * 16} | yes |"
    assert rows[4] == f"| `{avx2}` | – | {'e' * 16} | only one machine |"


def test_a_machine_key_names_the_model_and_its_instruction_sets():
    one = {"model": "Intel(R) Xeon(R) Processor", "isa": ["avx", "avx2", "avx512f"],
           "family_model_stepping": "6/143/8"}
    assert portability.machine_key(one).startswith("Intel_R_Xeon_R_Processor_")
    for other in ({**one, "isa": ["avx", "avx2"]}, {**one, "family_model_stepping": "6/106/6"}):
        assert portability.machine_key(one) != portability.machine_key(other)
    assert portability.machine_key(portability.machine()).count("_") >= 1
