"""Human units and plurals, one implementation for the CLI, the library's text and the chapters."""

import pytest

from parlab.tables import human_bytes, human_ibytes, human_rate, human_seconds, plural, table


@pytest.mark.parametrize("seconds, text", [
    (1.5e-5, "15 µs"), (3.2e-3, "3.2 ms"), (14, "14 s"), (86_400, "1 day"), (2 * 86_400, "2 days"),
    (365.25 * 86_400, "1 year"), (288 * 365.25 * 86_400, "288 years"), (0, "0 s"),
])
def test_seconds_use_the_micro_sign_and_singular_units(seconds, text):
    assert human_seconds(seconds) == text


@pytest.mark.parametrize("rate, text", [(2.51189e9, "2.51 GB/s"), (300e9, "300 GB/s"), (0.140625e9, "141 MB/s"),
                                        (1.2e12, "1.2 TB/s")])
def test_rates_have_three_significant_digits(rate, text):
    assert human_rate(rate) == text


@pytest.mark.parametrize("value, show, text", [(999.6e9, human_rate, "1 TB/s"), (999.6e6, human_rate, "1 GB/s"),
                                              (0.9996, human_seconds, "1 s"), (0.0009996, human_seconds, "1 ms")])
def test_rounding_up_to_a_thousand_moves_to_the_next_unit(value, show, text):
    assert show(value) == text  # not '1e+03 GB/s' or '1e+03 ms'


def test_binary_sizes_take_the_largest_unit():
    assert human_ibytes(16 * 2**20) == "16 MiB" and human_ibytes(2**10) == "1 KiB"


def test_decimal_bytes_auto_unit():
    assert human_bytes(65_900, "auto") == "65.9 KB" and human_bytes(3.2e9, "auto") == "3.2 GB"
    assert human_bytes(2.8e12) == "2,800 GB"


@pytest.mark.parametrize("n, word, text", [(1, "micro-batch", "1 micro-batch"), (8, "micro-batch", "8 micro-batches"),
                                           (1, "GPU", "1 GPU"), (1024, "GPU", "1,024 GPUs"), (8.0, "layer", "8 layers"),
                                           (2, "chunk", "2 chunks")])
def test_plurals_agree_with_counts(n, word, text):
    assert plural(n, word) == text


def test_a_column_of_floats_shares_its_decimals():
    # parlab search's memory and step columns: 72 under 66.1, 76.9 under 75.59, before
    text = table([[1, 66.1, 75.59, 12345.0], [2, 72.0, 76.9, 0.5]], ["#", "memory", "step", "big"])
    lines = text.splitlines()
    assert lines[2].split() == ["1", "66.1", "75.59", "12,345.0"]
    assert lines[3].split() == ["2", "72.0", "76.90", "0.5"]
    # a column that needs an exponent, or mixes in text, keeps each value's own form
    assert table([[1e-9], [2.5]], ["x"]).splitlines()[2:] == ["1e-09", "  2.5"]
    assert table([["-"], [2.5]], ["x"]).splitlines()[2:] == ["-", "2.5"]
