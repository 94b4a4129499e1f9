"""Links and clusters: units spelled out, presets that match their datasheets, and a rank layout
that puts each parallel group where Megatron-LM puts it."""

import pytest

from parlab.costmodel import (
    LINKS,
    Cluster,
    coords,
    custom_link,
    get_gpu,
    get_link,
    group_link,
    group_ranks,
    group_span,
    make_cluster,
    rank_of,
)
from parlab.costmodel.specs.cluster import CLUSTERS


# -- units -----------------------------------------------------------------------------------------
def test_ten_gigabit_ethernet_carries_1_25_gigabytes_per_second_each_way():
    assert get_link("10gbe").bandwidth == 1.25e9
    assert get_link("10gbe").gbit == pytest.approx(10)


@pytest.mark.parametrize("name, per_direction, headline", [
    ("nvlink3-a100", 300e9, "600 GB/s"),
    ("nvlink3-a800", 200e9, "400 GB/s"),
    ("nvlink4-h100", 450e9, "900 GB/s"),
])
def test_nvlink_headline_counts_both_directions(name, per_direction, headline):
    link = get_link(name)
    assert link.bandwidth == per_direction
    assert headline in link.headline and "2 directions" in link.headline


@pytest.mark.parametrize("name, gbit", [("ib-hdr", 200), ("ib-ndr", 400), ("ib-xdr", 800), ("25gbe", 25)])
def test_network_presets_are_their_gigabit_rates(name, gbit):
    assert get_link(name).bandwidth == gbit * 1e9 / 8


def test_every_preset_states_its_source_and_headline():
    for link in LINKS.values():
        assert link.source and link.headline and 0 < link.efficiency <= 1


def test_guide_4_4_links_can_be_built_in_gbit():
    slow, fast = custom_link(64), get_link("800g")
    assert fast.bandwidth / slow.bandwidth == pytest.approx(800 / 64)


def test_unknown_link_lists_the_presets():
    with pytest.raises(ValueError, match="unknown link 'infiniband-9000'.*ib-hdr"):
        get_link("infiniband-9000")


# -- clusters ------------------------------------------------------------------------------------
def test_a_cluster_is_made_of_whole_nodes():
    with pytest.raises(ValueError, match="n_gpus=12 is not a multiple of gpus_per_node=8"):
        make_cluster("dgx-a100", 12)
    assert make_cluster("dgx-a100", 4).nodes == 1


def test_make_cluster_overrides_any_field():
    c = make_cluster("dgx-a100", 16, gpu="h100", inter="ndr", nics_per_node=4)
    assert c.gpu == get_gpu("h100-sxm") and c.inter == get_link("ib-ndr") and c.nics_per_node == 4


def test_commodity_cluster_shares_one_port_between_eight_gpus():
    c = make_cluster("pcie-10gbe", 16)
    assert c.net_share_per_gpu == pytest.approx(1.25e9 * 0.9 / 8)


def test_every_cluster_kind_builds():
    for kind in CLUSTERS:
        assert isinstance(make_cluster(kind, 16), Cluster)


# -- rank layout: tp fastest, then dp, then pp (Megatron-LM) ------------------------------------
def test_guide_1_9_layout_32_workers():
    tp, dp, pp = 4, 2, 4
    assert group_ranks("tp", 0, tp, dp, pp) == [0, 1, 2, 3]
    assert group_ranks("dp", 0, tp, dp, pp) == [0, 4]
    assert group_ranks("pp", 0, tp, dp, pp) == [0, 8, 16, 24]
    assert all(rank_of(*coords(r, tp, dp), tp, dp) == r for r in range(32))


def test_tp_group_stays_inside_a_node_and_dp_crosses_nodes():
    tp, dp, pp = 8, 4, 2
    assert not group_span("tp", tp, dp, pp, 8).crosses_nodes
    span = group_span("dp", tp, dp, pp, 8)
    assert (span.per_node, span.nodes) == (1, 4)


def test_small_tp_leaves_several_dp_ranks_per_node():
    span = group_span("dp", 2, 16, 1, 8)
    assert (span.per_node, span.nodes) == (4, 4)


def test_misaligned_groups_are_counted_exactly():
    span = group_span("tp", 3, 8, 1, 8)  # {6, 7, 8} straddles two nodes
    assert span.nodes == 2 and span.per_node == 1


def test_group_inside_a_node_uses_nvlink_across_nodes_the_network():
    c = make_cluster("dgx-a100", 64)
    inside = group_link(c, group_span("tp", 8, 8, 1, 8))
    across = group_link(c, group_span("dp", 8, 8, 1, 8))
    assert inside.bandwidth == get_link("nvlink3-a100").achievable
    assert across.bandwidth == pytest.approx(25e9 * 0.9)  # one HDR port per GPU
    assert "inter-node" in across.where


def test_a_group_with_k_ranks_per_node_gets_k_ports_but_never_more_than_nvlink():
    c = make_cluster("dgx-a100", 64)
    four = group_link(c, group_span("dp", 2, 32, 1, 8))
    assert four.bandwidth == pytest.approx(4 * 25e9 * 0.9)
    c2 = make_cluster("dgx-a100", 64, inter="ib-xdr")  # 8 x 100 GB/s ports: NVLink is the limit
    eight = group_link(c2, group_span("dp", 1, 64, 1, 8))
    assert eight.bandwidth == get_link("nvlink3-a100").achievable
