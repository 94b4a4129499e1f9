"""GPU and cluster presets: every peak figure is the one its source cites (dense, not sparse),
FP8 only where the silicon has it, and a GPU brings its own intra-node link to a cluster."""

import pytest

from parlab.cli import main
from parlab.costmodel import CLUSTERS, GPUS, Plan, estimate, get_gpu, get_link, make_cluster


def _figure(x: float) -> str:
    """A figure the way the sources write it: 1,979 / 1,307.4 / 19.5."""
    return f"{x:,.2f}".rstrip("0").rstrip(".")


@pytest.mark.parametrize("name", list(GPUS))
def test_every_gpu_peak_matches_its_source(name):
    g = GPUS[name]
    for value in (g.half_flops / 1e12, g.fp32_flops / 1e12):
        assert _figure(value) in g.source, (name, value)
    gb = g.hbm_bytes_per_s / 1e9
    assert f"{_figure(gb)} GB/s" in g.source or f"{_figure(gb / 1000)} TB/s" in g.source, (name, gb)
    if g.fp8_flops:
        assert _figure(g.fp8_flops / 1e12) in g.source and "fp8" in g.source
    else:
        assert "no FP8" in g.source


@pytest.mark.parametrize("name", ["h100-sxm", "h200", "b200", "gb200", "mi300x", "l40s", "a10"])
def test_datasheets_quoting_sparsity_are_read_dense(name):
    g = GPUS[name]
    assert "dense" in g.source and "sparsity" in g.source
    assert g.fp8_flops == 0 or g.fp8_flops == pytest.approx(2 * g.half_flops, rel=0.02)  # FP8: 2x bf16


def test_new_gpus_have_their_published_figures():
    assert get_gpu("h800").fp8_flops == get_gpu("h100").fp8_flops == 1979e12
    assert get_gpu("h20").half_flops == 148e12 and get_gpu("h20").memory_bytes == 96 * 2**30
    assert get_gpu("b200").mxfp8 and get_gpu("gb200").mxfp8 and not get_gpu("h100").mxfp8
    assert get_gpu("rtx4090").half_flops == 165.2e12  # fp32 accumulate, what training uses
    assert get_gpu("4090") is get_gpu("rtx4090")


@pytest.mark.parametrize("name", ["v100", "a100", "a100-40gb", "a800", "a10"])
def test_fp8_is_refused_on_a_gpu_without_fp8_tensor_cores(name):
    cluster = make_cluster("dgx-a100", 8, gpu=name)
    with pytest.raises(ValueError, match=f"^{get_gpu(name).name} has no FP8 tensor cores"):
        estimate("gpt3-6.7b", cluster, Plan(dp=8, dtype="fp8"))


def test_mxfp8_needs_blackwell():
    with pytest.raises(ValueError, match="h100-sxm has no MXFP8 tensor cores"):
        estimate("gpt3-6.7b", make_cluster("dgx-h100", 8), Plan(dp=8, dtype="fp8", fp8_recipe="mxfp8"))
    est = estimate("gpt3-6.7b", make_cluster("dgx-b200", 8), Plan(dp=8, zero=1, dtype="fp8", fp8_recipe="mxfp8"))
    assert est.fits and "FP8 (mxfp8)" in est.explain()


# -- a GPU's own link ----------------------------------------------------------------------------
def test_h100_cluster_uses_nvlink4():
    assert make_cluster("dgx-a100", 16, gpu="h100").intra == get_link("nvlink4-h100")
    assert make_cluster(gpu="h100").intra == get_link("nvlink4-h100")
    assert make_cluster("dgx-h100", 16).intra == get_link("nvlink4-h100")


def test_a_gpu_brings_its_own_link_but_a_pcie_box_stays_pcie():
    assert make_cluster("dgx-a100", 8, gpu="a800").intra.name == "nvlink3-a800"
    assert make_cluster("dgx-a100", 8, gpu="rtx4090").intra.name == "pcie4"  # no NVLink on a 4090
    assert make_cluster("dgx-h100", 8, gpu="b200").intra.name == "nvlink5"
    assert make_cluster("pcie-10gbe", 8, gpu="h100").intra.name == "pcie4"
    assert make_cluster("rtx4090-10gbe", 8, gpu="a100").intra.name == "pcie4"
    assert make_cluster("dgx-a100", 8, gpu="h100", intra="nvlink3").intra.name == "nvlink3-a100"  # asked for


def test_cli_gpu_h100_prints_the_h100_nvlink(capsys):
    assert main(["estimate", "--model", "gpt3-6.7b", "--gpu", "h100", "--gpus", "8"]) == 0
    assert "8 x h100-sxm: 1 node of 8 GPUs, nvlink4-h100 (450 GB/s) inside" in capsys.readouterr().out


# -- clusters ------------------------------------------------------------------------------------
def test_deepseek_v3_cluster_is_h800s_with_160_gb_s_nvlink_and_50_gb_s_ib():
    c = make_cluster("deepseek-v3", 2048)  # DeepSeek-V3 report, Sec. 3.1 and 3.2.2
    assert c.gpu.name == "h800" and c.intra.achievable == pytest.approx(160e9)
    assert c.inter.bandwidth == pytest.approx(50e9) and c.nics_per_node == c.gpus_per_node == 8


def test_gb200_nvl72_is_one_nvlink_domain_of_72_gpus():
    c = make_cluster("gb200-nvl72", 144)
    assert c.gpus_per_node == 72 and c.nodes == 2 and c.intra.headline.startswith("1.8 TB/s")
    assert make_cluster("gb200-nvl72", 72).describe().endswith("nvlink5 (900 GB/s) inside")


def test_china_and_commoner_clusters():
    assert make_cluster("h20-roce", 16).inter.name == make_cluster("h800-roce", 16).inter.name == "400gbe"
    box = make_cluster("rtx4090-10gbe", 16)
    assert (box.gpu.name, box.intra.name, box.inter.name, box.nics_per_node) == ("rtx4090", "pcie4", "10gbe", 1)
    assert {"h800-roce", "h20-roce", "dgx-b200", "gb200-nvl72", "mi300x-roce", "rtx4090-10gbe"} <= set(CLUSTERS)


def test_parlab_gpus_lists_the_new_gpus(capsys):
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    for name in ("h800", "h20", "b200", "gb200", "mi300x", "l40s", "rtx4090", "a10", "4,500.0+MX"):
        assert name in out
