"""DeepSpeed's launcher files: the multi-node hostfile (guide 4.3) and ``.deepspeed_env`` (guide 4.5),
written and checked so that neither DeepSpeed nor pdsh refuses or misreads them.

What they read, and so the rules here. DeepSpeed's runner (deepspeed/launcher/runner.py,
``fetch_hostfile`` / ``_parse_hostfile``) reads a hostfile line by line: a line starting with
``#`` is a comment, every other line must match ``^(\\S+)\\s+slots=(\\d+)``, and a host listed
twice is refused. Its pdsh runner (multinode_runner.py) joins the hosts with commas for ``pdsh
-w`` (where ``,`` and ``[...]`` are host-list syntax) and exports every ``.deepspeed_env`` line
``KEY=VALUE`` on each node as ``export KEY=VALUE;`` inside a shell command. A host name is an
IP address or a DNS name: labels of at most 63 characters, at most 253 in all (RFC 1035 2.3.4),
of letters, digits and hyphens, no label starting or ending with one (RFC 1123 2.1; ``_``, which
/etc/hosts aliases use, is tolerated). Every error is one line naming the value and the rule.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass

#: NCCL environment variables of guide 4.5 -> what each does (NCCL's "Environment Variables" docs)
NCCL_VARS: dict[str, str] = {
    "NCCL_IB_DISABLE": "1 turns off NCCL's InfiniBand/RoCE (IB verbs) transport, so traffic between nodes "
                       "falls back to TCP sockets: it connects where IB is absent or misconfigured, at "
                       "socket speed (guide 4.4's bandwidth problem in another form)",
    "NCCL_SOCKET_IFNAME": "the network interface(s) NCCL's bootstrap and socket transport use (a prefix: eth0, "
                          "^docker excludes); without it NCCL may pick lo, docker0 or a bridge the other "
                          "node cannot reach, and the ranks never find each other",
    "NCCL_P2P_DISABLE": "1 turns off direct GPU-to-GPU copies inside a node (NVLink or PCIe peer-to-peer); "
                        "data goes through host memory instead: a cure for hangs on some PCIe/virtualised "
                        "machines, at a loss of intra-node bandwidth",
    "NCCL_DEBUG": "INFO prints NCCL's version, the interfaces and transports it chose (NET/IB, NET/Socket, "
                  "P2P, SHM) and its rings and trees: the first thing to read when nodes do not connect",
}

HOST_RULE = ("an IP address or a DNS name: labels of 1-63 letters, digits, '-' or '_' separated by dots, "
             "none starting or ending with '-', at most 253 characters (RFC 1035, RFC 1123)")
#: an IPv6 scope id: a Linux interface name (at most 15 characters, IFNAMSIZ - 1) or a zone index
SCOPE_RULE = "1-15 letters, digits, '_', '.' or '-' (an interface name such as eth0, or a zone number)"
_SCOPE = re.compile(r"[A-Za-z0-9_.-]{1,15}")
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?")
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
#: what a ``.deepspeed_env`` value may hold besides ASCII letters and digits: nothing a shell reads
#: in ``export KEY=VALUE`` (older DeepSpeed writes VALUE bare) or ``export KEY="VALUE"`` (newer
#: versions quote it) -- no whitespace, quote, ``$``, backtick, ``\``, ``;&|<>()``, no brace
#: (``{x,y}``), tilde (``~``) or glob (``*?[``) expansion, no ``#`` or ``!``; and no ``%``: pdsh
#: replaces ``%h``, ``%u``, ``%n`` and ``%%`` in the command it runs (pdsh src/common/pipecmd.c,
#: ``pipecmd_format_arg``; DeepSpeed's own ``--node_rank=%n`` relies on it)
VALUE_SAFE = "_-.,:/=+@^"


def _shown(value) -> str:
    """``repr`` of a value, cut to a readable length (a 10,000-character host stays one line)."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}...{text[-12:]} ({len(value):,} characters)"


def host_problem(host: str) -> str:
    """What is wrong with ``host`` as a hostfile host ('' if nothing is). An IPv6 address may carry a
    scope id (``fe80::1%eth0``, RFC 4007 11.2), which Python's ``ipaddress`` takes whatever it holds
    (``fe80::1%a;reboot``): here it must be an interface name (``SCOPE_RULE``), since DeepSpeed's
    runner puts the host into ``ssh {host} hostname`` run by a shell and pdsh reads ``,`` and ``[..]``."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        scope = getattr(address, "scope_id", None)
        if scope is not None and not _SCOPE.fullmatch(scope):
            return f"scope id {_shown(scope)} after '%' is not an interface name: a scope id is {SCOPE_RULE}"
        return ""
    bad = next((c for c in host if not (c.isascii() and (c.isalnum() or c in "-_."))), None)
    if bad is not None:
        return f"character {bad!r} (U+{ord(bad):04X}) is not allowed in a host"
    name = host[:-1] if host.endswith(".") else host  # a fully qualified name may end with a dot
    if not name or len(name) > 253:
        return f"a host name has 1 to 253 characters, this one {len(name):,}"
    for label in name.split("."):
        if len(label) > 63:
            return f"label {_shown(label)} has {len(label)} characters, at most 63 are allowed"
        if not _LABEL.fullmatch(label):
            return f"label {label!r} must be 1-63 letters, digits, '-' or '_', not starting or ending with '-'"
    if all(label.isdigit() for label in name.split(".")):
        return "it looks like an IPv4 address but is not one"
    return ""


def hostfile(hosts: Mapping[str, int]) -> str:
    """A DeepSpeed hostfile: one ``<host> slots=<GPUs>`` line per node (DeepSpeed "Resource
    Configuration (multi-node)" docs). Write IP addresses: every node must resolve every name the
    same way, and a name only one machine's /etc/hosts knows is the guide's "host not found" (4.3)."""
    if not isinstance(hosts, Mapping):
        raise TypeError(f"hosts must be a dict {{host: slots}}, got {type(hosts).__name__}")
    if not hosts:
        raise ValueError("a hostfile needs at least one host")
    lines = []
    for host, slots in hosts.items():
        if not isinstance(host, str):
            raise TypeError(f"a host must be a string ({HOST_RULE}), got {host!r}")
        if problem := host_problem(host):
            raise ValueError(f"host {_shown(host)}: {problem}; a host is {HOST_RULE}")
        if isinstance(slots, bool) or not isinstance(slots, int):
            raise TypeError(f"slots of {host} must be a positive integer (GPUs on the node), got {slots!r}")
        if slots < 1:
            raise ValueError(f"slots of {host} must be a positive integer (GPUs on the node), got {slots!r}")
        lines.append(f"{host} slots={slots}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class HostCheck:
    """One hostfile entry as this machine sees it: an IP address, or a name and what it resolves to."""

    host: str
    slots: int
    is_ip: bool
    resolved: str | None  # the address it resolves to here; None: it does not resolve
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.resolved is not None


def _entry(number: int, line: str) -> tuple[str, int]:
    """(host, slots) of one hostfile line that is not blank or a comment, or the error naming it."""
    parts = line.split()
    words = parts[:next((i for i, p in enumerate(parts) if p.startswith("#")), len(parts))]
    if len(words) != 2 or not words[1].startswith("slots="):
        raise ValueError(f"hostfile line {number} must read '<host> slots=<n>' (a comment only after it, "
                         f"or on a line of its own), got {_shown(line)}")
    host, slots = words[0], words[1][len("slots="):]
    if problem := host_problem(host):
        raise ValueError(f"hostfile line {number}: host {_shown(host)}: {problem}; a host is {HOST_RULE}")
    if not (slots.isascii() and slots.isdigit()) or int(slots) < 1:
        raise ValueError(f"hostfile line {number}: slots must be a positive integer (GPUs on the node), "
                         f"got {_shown(slots)}")
    return host, int(slots)


def check_hostfile(text: str, resolve=None) -> list[HostCheck]:
    """Read a hostfile and resolve each host on *this* machine (``resolve(host) -> address``,
    default ``socket.gethostbyname``). The launcher resolves on the node it runs on, each worker on
    its own: the check has to pass on every node, which only IP addresses guarantee. What DeepSpeed
    or pdsh would refuse or misread is an error naming the line and the rule."""
    if not isinstance(text, str):
        raise TypeError(f"a hostfile is text (the file's contents, a str), got {type(text).__name__}")
    resolve = resolve or socket.gethostbyname
    out, seen = [], {}
    for number, raw in enumerate(text.split("\n"), 1):  # DeepSpeed reads lines as a file does
        if "\0" in raw:
            raise ValueError(f"hostfile line {number} holds a NUL character: {_shown(raw)}")
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        host, slots = _entry(number, line)
        if host in seen:
            raise ValueError(f"hostfile line {number}: host {host!r} is already on line {seen[host]} "
                             "(DeepSpeed refuses a host listed twice)")
        seen[host] = number
        try:
            ipaddress.ip_address(host)
            out.append(HostCheck(host, slots, True, host))
            continue
        except ValueError:
            pass
        try:
            out.append(HostCheck(host, slots, False, resolve(host)))
        except (OSError, UnicodeError) as err:
            out.append(HostCheck(host, slots, False, None, f"{type(err).__name__}: {err}"))
    if not out:
        raise ValueError("the hostfile lists no host (DeepSpeed refuses an empty hostfile)")
    return out


def _value_problem(value: str) -> str:
    """What a shell would do to ``value`` in ``export KEY=VALUE`` ('' if nothing): the characters
    outside ``VALUE_SAFE``, each named."""
    bad = list(dict.fromkeys(c for c in value if not (c.isascii() and c.isalnum()) and c not in VALUE_SAFE))
    if not bad:
        return ""
    shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in bad)
    return (f"character{'s' if len(bad) > 1 else ''} {shown}: a value may hold only letters, digits and "
            f"{VALUE_SAFE} (a shell would split, expand or run the rest; pdsh rewrites %h, %u, %n)")


def deepspeed_env(variables: Mapping[str, str | int]) -> str:
    """The ``.deepspeed_env`` file (``KEY=VALUE`` lines) that DeepSpeed's multi-node launcher reads
    from the working or home directory and exports on every node it starts (guide 4.5). A value is
    one word of ``VALUE_SAFE`` characters: DeepSpeed's runner (runner.py) splits each line at its
    first ``=`` and its pdsh runner (multinode_runner.py, ``add_export`` / ``get_cmd``) puts it into
    a shell command as ``export KEY=VALUE;`` (bare in older versions, in double quotes in newer ones), where
    bash would turn ``{x,y}`` into ``y`` and ``~`` into a home directory."""
    if not isinstance(variables, Mapping):
        raise TypeError(f"variables must be a dict {{NAME: value}}, got {type(variables).__name__}")
    lines = []
    for key, value in variables.items():
        if not isinstance(key, str):
            raise TypeError(f"an environment variable name is a string, got {key!r}")
        if not _NAME.fullmatch(key):
            raise ValueError(f"an environment variable name is an upper-case identifier, got {key!r}")
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise TypeError(f"{key}'s value must be a string or an integer (write 1 or 0 for a flag), "
                            f"got {value!r}")
        try:
            text = str(value)
        except ValueError:  # an int past Python's 4,300-digit limit for str()
            raise ValueError(f"{key}'s value is an integer of more than 4,300 digits: not an environment "
                             "value") from None
        if problem := _value_problem(text):
            raise ValueError(f"{key}'s value must be one word, got {_shown(value)}: {problem}")
        lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"
