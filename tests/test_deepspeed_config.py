"""DeepSpeed ZeRO configs generated from a Plan (parlab.train.deepspeed_config): DeepSpeed's field names,
consistent batch sizes, stage-specific fields, every field explained."""

import json

import pytest

from parlab.costmodel import Plan, get_model
from parlab.train.deepspeed_config import (
    FIELDS,
    compare,
    deepspeed_config,
    explain,
    flatten,
    to_json,
)

# Field names of DeepSpeed's configuration reference (deepspeed.ai/docs/config-json): the spec
DEEPSPEED_TOP = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                 "gradient_clipping", "bf16", "fp16", "zero_optimization"}
DEEPSPEED_ZERO = {"stage", "overlap_comm", "contiguous_gradients", "reduce_bucket_size", "reduce_scatter",
                  "allgather_partitions", "allgather_bucket_size", "stage3_prefetch_bucket_size",
                  "stage3_param_persistence_threshold", "stage3_max_live_parameters", "stage3_max_reuse_distance",
                  "stage3_gather_16bit_weights_on_model_save", "offload_optimizer", "offload_param"}
H = get_model("llama-7b").hidden


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_fields_are_deepspeeds_and_batches_agree(zero):
    plan = Plan(dp=16, zero=zero, micro_batch=2, micro_batches=4)
    cfg = json.loads(to_json(deepspeed_config("llama-7b", plan)))
    assert set(cfg) <= DEEPSPEED_TOP and set(cfg["zero_optimization"]) <= DEEPSPEED_ZERO
    assert cfg["train_batch_size"] == 2 * 4 * 16 == plan.batch
    assert cfg["train_micro_batch_size_per_gpu"] == 2 and cfg["gradient_accumulation_steps"] == 4
    z = cfg["zero_optimization"]
    assert z["stage"] == zero and z["overlap_comm"] and z["contiguous_gradients"]
    assert z["reduce_bucket_size"] == H * H
    stage3 = {k for k in z if k.startswith("stage3_")}
    assert bool(stage3) == (zero == 3)
    assert ("allgather_bucket_size" in z) == (zero < 3)
    if zero == 3:
        assert z["stage3_prefetch_bucket_size"] == int(0.9 * H * H)
        assert z["stage3_param_persistence_threshold"] == 10 * H


def test_precision_and_offload():
    fp16 = deepspeed_config("llama-7b", Plan(dp=8, zero=3, dtype="fp16", offload="optimizer+params"))
    assert fp16["fp16"]["enabled"] and "bf16" not in fp16
    assert fp16["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert fp16["zero_optimization"]["offload_param"]["device"] == "cpu"
    plain = deepspeed_config("llama-7b", Plan(dp=8, zero=2))
    assert plain["bf16"] == {"enabled": True} and "offload_optimizer" not in plain["zero_optimization"]


def test_every_field_is_explained_and_the_diff_shows_only_differences():
    for zero in (2, 3):
        cfg = deepspeed_config("llama-7b", Plan(dp=8, zero=zero, offload="optimizer"))
        rows = explain(cfg)
        assert [r[0] for r in rows] == list(flatten(cfg)) and all(r[2] == FIELDS[r[0]] for r in rows)
    diff = compare("llama-7b", {"2": Plan(dp=8, zero=2), "3": Plan(dp=8, zero=3)})
    assert ["zero_optimization.stage", "2", "3"] in diff
    assert all(r[1] != r[2] for r in diff) and not any(r[0] == "train_batch_size" for r in diff)
    with pytest.raises(ValueError, match="no explanation"):
        explain({"zero_optimization": {"stage": 2, "made_up": 1}})


@pytest.mark.parametrize("plan, match", [
    (Plan(dp=4, tp=2, zero=2), "tp and pp must be 1"),
    (Plan(dp=8, zero=2, dtype="fp32"), "bf16 or fp16"),
])
def test_plans_deepspeed_cannot_express_are_refused(plan, match):
    with pytest.raises(ValueError, match=match):
        deepspeed_config("llama-7b", plan)
    with pytest.raises(TypeError, match="plan must be a Plan"):
        deepspeed_config("llama-7b", {"zero": 2})


def test_hostfile_with_ips_passes_and_an_unresolved_name_is_named():
    from parlab.train.deepspeed_config import check_hostfile, hostfile

    text = hostfile({"10.0.0.1": 8, "gpu-node-2": 8})
    assert text == "10.0.0.1 slots=8\ngpu-node-2 slots=8\n"
    known = {"gpu-node-2": "10.0.0.2"}  # this machine's /etc/hosts

    def resolve(host):
        if host not in known:
            raise OSError(f"unknown host {host}")
        return known[host]

    here = check_hostfile(text, resolve)
    assert [(h.host, h.is_ip, h.resolved) for h in here] == [("10.0.0.1", True, "10.0.0.1"),
                                                              ("gpu-node-2", False, "10.0.0.2")]
    known.clear()  # the other node's /etc/hosts lacks the name: the guide's "host not found"
    there = check_hostfile(text + "# a comment\n", resolve)
    assert there[0].ok and not there[1].ok and "unknown host gpu-node-2" in there[1].error
    with pytest.raises(ValueError, match="slots="):
        check_hostfile("10.0.0.1 8", resolve)
    with pytest.raises(ValueError, match="positive integer"):
        hostfile({"10.0.0.1": 0})


def test_deepspeed_env_writes_the_nccl_variables_of_guide_4_5():
    from parlab.train.deepspeed_config import NCCL_VARS, deepspeed_env

    env = {"NCCL_IB_DISABLE": 1, "NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_P2P_DISABLE": 1}
    assert deepspeed_env(env).splitlines() == ["NCCL_IB_DISABLE=1", "NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME=eth0",
                                               "NCCL_P2P_DISABLE=1"]
    assert set(env) == set(NCCL_VARS)
    with pytest.raises(ValueError, match="upper-case identifier"):
        deepspeed_env({"nccl debug": "INFO"})


# -- what DeepSpeed or pdsh would refuse or misread is refused here first (issue 18 item 15) -------
@pytest.mark.parametrize("text, match", [
    ("a" * 64 + " slots=8", "line 1: host 'a{64}': label 'a{64}' has 64 characters, at most 63"),
    ("10.0.0.1 slots=8\nno\0de slots=8", "line 2 holds a NUL character"),
    ("10.0.0.1 slots=abc", "line 1: slots must be a positive integer .*got 'abc'"),
    ("# head\n10.0.0.1 slots=0", "line 2: slots must be a positive integer .*got '0'"),
    ("10.0.0.1 slots=-4", "line 1: slots must be a positive integer .*got '-4'"),
    ("node#1 slots=8", r"line 1: host 'node#1': character '#' \(U\+0023\) is not allowed"),
    ("node,2 slots=8", "line 1: host 'node,2': character ','"),
    ("10.0.0.1 slots=8\n10.0.0.1 slots=4", "line 2: host '10.0.0.1' is already on line 1"),
    ("10.0.0.1 8", "line 1 must read '<host> slots=<n>'"),
    ("# only a comment\n", "lists no host"),
])
def test_check_hostfile_refuses_what_deepspeed_or_pdsh_would_misread_with_line_and_rule(text, match):
    from parlab.train.deepspeed_config import check_hostfile

    with pytest.raises(ValueError, match=match) as info:
        check_hostfile(text, lambda host: "10.0.0.9")
    assert "\n" not in str(info.value)


def test_check_hostfile_takes_text_and_a_trailing_comment():
    from parlab.train.deepspeed_config import check_hostfile

    with pytest.raises(TypeError, match="a hostfile is text .*got NoneType"):
        check_hostfile(None)
    here = check_hostfile("10.0.0.1 slots=8  # node A\r\nnode-2.example.com. slots=4\n", lambda h: "10.0.0.2")
    assert [(h.host, h.slots, h.resolved) for h in here] == [("10.0.0.1", 8, "10.0.0.1"),
                                                             ("node-2.example.com.", 4, "10.0.0.2")]


@pytest.mark.parametrize("hosts, error, match", [
    ({"a\nb": 8}, ValueError, r"host 'a\\nb': character '\\n'"),
    ({"node\t1": 8}, ValueError, r"character '\\t'"),
    ({"node#1": 8}, ValueError, "character '#'"),
    ({"x" * 64: 8}, ValueError, "64 characters, at most 63"),
    ({None: 8}, TypeError, "a host must be a string"),
    ({"10.0.0.1": 0}, ValueError, "slots of 10.0.0.1 must be a positive integer"),
    ({"10.0.0.1": "8"}, TypeError, "slots of 10.0.0.1 must be a positive integer"),
    (["10.0.0.1"], TypeError, r"hosts must be a dict \{host: slots\}, got list"),
])
def test_hostfile_never_writes_a_line_it_would_not_read_back(hosts, error, match):
    from parlab.train.deepspeed_config import hostfile

    with pytest.raises(error, match=match):
        hostfile(hosts)


def test_a_written_hostfile_reads_back_as_written():
    from parlab.train.deepspeed_config import check_hostfile, hostfile

    hosts = {"10.0.0.1": 8, "fe80::1": 4, "gpu_node-2.cluster.local": 2, "h" * 63: 1}
    assert {h.host: h.slots for h in check_hostfile(hostfile(hosts), lambda h: "10.0.0.3")} == hosts


@pytest.mark.parametrize("value, error, match", [
    ("eth0\tlo", ValueError, r"NCCL_SOCKET_IFNAME's value must be one word, got 'eth0\\tlo': character '\\t'"),
    ("INFO\r", ValueError, r"character '\\r'"),
    ("IN\0FO", ValueError, r"character '\\x00'"),
    ("eth0 lo", ValueError, "character ' '"),
    ("eth0;reboot", ValueError, r"character ';' \(U\+003B\): a value may hold only letters, digits and "),
    ("{x,y}", ValueError, r"characters '\{' \(U\+007B\), '\}' \(U\+007D\): .*a shell would"),  # bash: y
    ("~", ValueError, "character '~'"),  # bash: the home directory
    ("eth*", ValueError, r"character '\*'"),
    ("eth[01]", ValueError, r"characters '\[' \(U\+005B\), '\]'"),
    ("a#b!", ValueError, "characters '#' .*, '!'"),
    ("/tmp/nccl.%h.%p", ValueError, r"character '%' \(U\+0025\): .*pdsh rewrites %h, %u, %n"),  # pdsh: node name
    ("eth0\u2028", ValueError, r"character '\\u2028' \(U\+2028\)"),
    (None, TypeError, "value must be a string or an integer"),
    (True, TypeError, "write 1 or 0"),
])
def test_deepspeed_env_refuses_values_the_launcher_would_misread(value, error, match):
    from parlab.train.deepspeed_config import deepspeed_env

    with pytest.raises(error, match=match):
        deepspeed_env({"NCCL_SOCKET_IFNAME": value})
    with pytest.raises(TypeError, match="variables must be a dict"):
        deepspeed_env([("NCCL_DEBUG", "INFO")])
    assert deepspeed_env({"NCCL_SOCKET_IFNAME": "^docker,lo"}) == "NCCL_SOCKET_IFNAME=^docker,lo\n"


@pytest.mark.parametrize("clip, error", [
    (float("nan"), ValueError), (float("inf"), ValueError), (-1, ValueError), ("1.0", TypeError),
    (None, TypeError), (True, TypeError),
])
def test_gradient_clipping_is_a_finite_number_at_least_zero(clip, error):
    with pytest.raises(error, match="gradient_clipping must be a .*number >= 0 .*0 turns clipping off"):
        deepspeed_config("llama-7b", Plan(dp=8, zero=2), gradient_clipping=clip)


def test_the_json_written_is_standard_and_clipping_zero_turns_it_off():
    cfg = deepspeed_config("llama-7b", Plan(dp=8, zero=2), gradient_clipping=0)
    assert json.loads(to_json(cfg))["gradient_clipping"] == 0.0
    cfg["gradient_clipping"] = float("nan")  # edited by hand: never written as NaN
    for write in (to_json, explain):
        with pytest.raises(ValueError, match="'gradient_clipping' must be a finite number, got nan"):
            write(cfg)


def test_explain_and_compare_name_the_type_they_expect():
    with pytest.raises(TypeError, match="config must be a dict .*got list"):
        explain([("bf16", True)])
    with pytest.raises(TypeError, match=r"plans must be a dict \{label: Plan\}, got list"):
        compare("llama-7b", [Plan(dp=8, zero=2)])


# -- F21/F22 of the attack review: shell and pdsh syntax in a host or an environment value ----------
@pytest.mark.parametrize("host", [
    "fe80::1%a;reboot", "fe80::1%b,evil.example.com", "fe80::1%$(cmd)", "fe80::1%`id`", "fe80::1%x\nline",
    "fe80::1%[1-9]", "fe80::1% x", "fe80::1%\0", "fe80::1%x y", "fe80::1%" + "e" * 16, "fe80::1%ｅth0",
])
def test_an_ipv6_scope_id_must_be_an_interface_name(host):
    """Python's ipaddress takes any scope id after '%'; DeepSpeed's runner runs ``ssh {host} hostname``
    with shell=True and pdsh reads ',' and '[..]' as host lists: only an interface name passes."""
    from parlab.train.deepspeed_config import check_hostfile, hostfile

    with pytest.raises(ValueError, match=r"scope id .* after '%' is not an interface name: a scope id is 1-15 "):
        hostfile({"10.0.0.1": 8, host: 8})
    if host.split("%")[1].strip() and not any(c.isspace() or c == "\0" for c in host):
        with pytest.raises(ValueError, match=r"line 2: host .*scope id"):
            check_hostfile(f"10.0.0.1 slots=8\n{host} slots=8\n", lambda h: "10.0.0.9")


def test_a_scope_id_that_names_an_interface_is_kept():
    from parlab.train.deepspeed_config import check_hostfile, hostfile

    hosts = {"fe80::1%eth0": 8, "fe80::2%enp1s0f0.100": 8, "fe80::3%2": 8, "fe80::4%" + "e" * 15: 8}
    assert [h.host for h in check_hostfile(hostfile(hosts))] == list(hosts)


def test_an_env_value_past_pythons_digit_limit_is_one_line():
    from parlab.train.deepspeed_config import deepspeed_env

    with pytest.raises(ValueError, match="NCCL_BUFFSIZE's value is an integer of more than 4,300 digits"):
        deepspeed_env({"NCCL_BUFFSIZE": 10**5000})


def test_every_accepted_env_value_reaches_bash_unchanged_bare_or_double_quoted():
    """What bash makes of each accepted value in both lines DeepSpeed's pdsh runner has written
    (``export K=V;`` bare in older versions, ``export K="V";`` in newer ones): the value itself.
    DeepSpeed's own runner is not available here (the deepspeed package is not installed), so the
    lines are built as its multinode_runner.py builds them and given to bash."""
    import shutil
    import subprocess

    from parlab.train.deepspeed_launcher import VALUE_SAFE, deepspeed_env

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash on this machine")
    values = ["^docker,lo", "eth0", "mlx5_0:1,mlx5_1:1", "=mlx5_0", "/opt/nccl/lib:/usr/lib", "a@b+d",
              "-1", "", VALUE_SAFE, "x" + VALUE_SAFE[::-1] + "9"]
    env = {f"V{i}": v for i, v in enumerate(values)}
    lines = [line.split("=", 1) for line in deepspeed_env(env).splitlines()]  # as runner.py reads them
    script = "".join(f'export {k}={v}; printf "%s\\0" "${k}"; export {k}="{v}"; printf "%s\\0" "${k}"; '
                     for k, v in lines)
    out = subprocess.run([bash, "--norc", "-c", script], capture_output=True, text=True, check=True,
                         timeout=60, cwd="/", env={"HOME": "/nonexistent", "PATH": "/usr/bin:/bin"})
    assert out.stdout.split("\0")[:-1] == [v for v in values for _ in (0, 1)]
