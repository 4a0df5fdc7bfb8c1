"""What NCCL_DEBUG=INFO says about the topology: network, NICs, GDR, NVLS, CollNet.

Many ranks print the same few lines, so facts are gathered, not lines. :func:`scan`
reads a text (one line, or a run of thousands of skipped debug lines) into
:data:`Facts`: the distinct fact texts found by one pattern with the literal prefix
``L INFO `` (NCCL's and RCCL's; C speed; other messages fail on their first
character), plus what its network channel lines say. A :class:`Topology` accumulates
the facts of one run (first network named, first NIC list, flags, maxima) and
:meth:`Topology.columns` turns them into the run's columns (schema.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# The lines that state a fact, matched only as far as the fact goes (`NVLS multicast
# support is available`, not `on dev 3`): the many ranks that print them then give
# the same text, read once. Branches by first letters, so that most other messages
# fail on their first character or two.
_FACTS = r"""L\ INFO\ (?:
    N(?:ET/(?:
            OFI\ Selected\ [Pp]rovider\ is\ [\w-]+
          | Plugin\ ?:\ ?(?:Loaded\ collnet|Failed\ to\ find\ ncclCollNetPlugin)
          | \w+\ ?:\ (?:Using\ \[\d+\][^;\r\n]*|GPU\ Direct\ RDMA\ Enabled))
       | VLS\ (?:multicast\ support\ is\ (?:not\ )?available|comm)
       | CCL_COLLNET_ENABLE\ set\ by\ environment\ to\ \d+)
  | Using\ network\ [^\r\n]+
  | GPU\ Direct\ RDMA\ Enabled
  | Co(?:nnected\ (?:NVLS|(?:inter-node\ )?CollNet|collnet)
       | ll(?:net\ Chains|Net\ (?:(?:is\ )?(?:not\ )?enabled|disabled)))
  | co(?:mm\ 0x[0-9a-fA-F]+\ rank\ \d+\ nRanks\ \d+\ nNodes\ \d{1,9}
          \ localRanks\ \d{1,9}
       | llNetSupport\ \d)
  | rank\ \d+\ Connected\ (?:NVLS|(?:inter-node\ )?CollNet|collnet)
  | P2P\ plugin\ (?:v\d+\ )?[\w.-]+
  | nvlsSupport\ \d
  | [1-9]\d*\ coll\ channels,\ (?:\d+\ collnet\ channels,\ )?\d{1,9}\ nvls\ channels
)"""
_FACT_TEXT = re.compile(_FACTS, re.VERBOSE | re.ASCII)
# Channel connection lines over the network (`Channel 00/0 : 0[0] -> 8[0] [send] via
# NET/IB/0/GDRDMA`; NCCL 2.4-2.5: `Ring 00 : 7 -> 8 [send] via NET/IB/0`; RCCL adds
# `comm 0x... nRanks 08`): hundreds per job, and only NCCL's connection lines say
# ` via NET/`, so a text is searched (str.find) for the first and for `/GDRDMA`.
_VIA_NET = " via NET/"
# One matched text at a time: which fact, and its value.
_FACT = re.compile(
    r"""L\ INFO\ (?:
        NET/(?:
            OFI\ Selected\ [Pp]rovider\ is\ (?P<ofi>[\w-]+)
          | Plugin\ ?:\ ?(?:(?P<cnload>Loaded\ collnet)|(?P<cnmiss>Failed))
          | (?P<ut>\w+)\ ?:\ (?:Using\ (?P<ud>.*)|GPU\ Direct\ RDMA\ (?P<hca>Enabled))
        )
      | Using\ network\ (?P<net>.+)
      | (?P<hca2>GPU\ Direct\ RDMA\ Enabled)
      | NVLS\ (?:multicast\ support\ is\ (?P<nvls>.+)|(?P<nvlsuse>comm))
      | (?:rank\ \d+\ )?Connected\ (?:(?P<nvlsuse2>NVLS)|(?P<cnon>.+))
      | \d+\ coll\ channels,\ (?:\d+\ collnet\ channels,\ )?(?P<nvlsch>\d+)
      | comm\ .*\ nNodes\ (?P<nn>\d+)\ localRanks\ (?P<lr>\d+)
      | P2P\ plugin\ (?:v\d+\ )?(?P<p2p>.+)
      | NCCL_COLLNET_ENABLE\ set\ by\ environment\ to\ (?P<cnenv>\d+)
      | (?P<cnon2>Collnet\ Chains)
      | (?P<cnst>CollNet\ .+)
      | (?P<sup>nvls|collNet)Support\ (?P<supv>\d)
    )""",
    re.VERBOSE | re.ASCII,
)
_NET_NAME = re.compile(r" via NET/([^/\r\n]+)", re.ASCII)
_NIC = re.compile(r"\[\d+\]([^\s:\[\]]+)", re.ASCII)
# Networks with two names: an IB external plugin (HPC-X) calls itself "NCCL RDMA Plugin
# vN" in `Using network` and names its transport (IBext_vN, UCX) on `P2P plugin`.
_WRAPPERS = ("NCCL RDMA Plugin",)
# Bounds on what a hostile log can make a run keep: NIC lists (one per transport name),
# NICs per list (NCCL handles at most 32 per node), texts remembered as read.
_MAX_TRANSPORTS = 8
_MAX_NICS = 64
_READ_MAX, _READ_LONGEST = 4096, 1024


def canonical_net(name: str) -> str:
    """The `net` column's name for a network NCCL names: IB, Socket, OFI or its own."""
    name = name.strip()
    if name == "IB" or name.startswith("IBext"):
        return "IB"
    if "Libfabric" in name or name.startswith("OFI"):
        return "OFI"
    return name


def _read(text: str) -> tuple[str, Any]:
    """What one fact text says, as (kind, value)."""
    match = _FACT.match(text)
    g = match.groupdict() if match else {}
    if g.get("ud") is not None:
        return "nics", (g["ut"], tuple(_NIC.findall(g["ud"])[:_MAX_NICS]))
    if g.get("hca") or g.get("hca2"):
        return "flag", "gdr"
    if g.get("ofi"):
        return "flag", "ofi"
    if g.get("net"):
        return "network", g["net"].strip()
    if g.get("p2p"):
        return "p2p", g["p2p"].strip()
    if g.get("nn"):
        return "nodes", (int(g["nn"]), int(g["lr"]))
    if g.get("nvls") or g.get("nvlsuse") or g.get("nvlsuse2") or g.get("nvlsch"):
        channels = g.get("nvlsch")
        off = g.get("nvls") == "not available" or (channels and int(channels) == 0)
        return "flag", "no_nvls" if off else "nvls"
    if g.get("cnload"):
        return "flag", "collnet_loaded"
    if g.get("cnmiss"):
        return "flag", "collnet_missing"
    if g.get("cnon") or g.get("cnon2"):
        return "flag", "collnet_connected"
    value = g.get("cnenv") or g.get("supv") or g.get("cnst") or ""
    off = value == "0" or "not " in value or "disabled" in value
    if g.get("sup") == "nvls":
        return "flag", "no_nvls" if off else "nvls"
    return "flag", "no_collnet" if off else "collnet"


_READ: dict[str, tuple[str, Any]] = {}  # texts already read: ranks repeat them

# What a text states: its distinct fact texts in order, the network named by its first
# network channel line (None: no such line) and whether a channel line says GDRDMA.
Facts = tuple[tuple[str, ...], str | None, bool]


def scan(text: str) -> Facts | None:
    """The facts in ``text`` (one line or many), None when it holds none."""
    found = _FACT_TEXT.findall(text)
    where = text.find(_VIA_NET)
    if where < 0:
        return (tuple(dict.fromkeys(found)), None, False) if found else None
    name = _NET_NAME.match(text, where)
    return (
        tuple(dict.fromkeys(found)),
        name.group(1).strip() if name else "",
        text.find("/GDRDMA", where) >= 0,
    )


_SCANNED: dict[str, Facts | None] = {}  # short texts already scanned


def scan_cached(text: str) -> Facts | None:
    """:func:`scan`, remembered for short texts: the channel lines between data rows
    reach the parser as their ``" via NET/..."`` part (``_scan.c``), the same text
    again and again."""
    if len(text) > _READ_LONGEST:
        return scan(text)
    try:
        return _SCANNED[text]
    except KeyError:
        pass
    if len(_SCANNED) >= _READ_MAX:
        _SCANNED.clear()
    facts = _SCANNED[text] = scan(text)
    return facts


# How the messages _FACTS reads begin (a digit: `16 coll channels, ...`).
_HINT = re.compile(r"L INFO (?:N[ECV]|Us|GP|[Cc]o|ra|P2|nv|[1-9])", re.ASCII)


def scan_line(text: str) -> Facts | None:
    """:func:`scan` for one line, cheaper: most lines are told apart by their start."""
    if _VIA_NET in text:
        return scan(text)
    if _HINT.search(text) is None:
        return None
    match = _FACT_TEXT.search(text)
    return None if match is None else ((match.group(),), None, False)


def holds_facts(text: str, end: int) -> bool:
    """Whether ``text[:end]`` has anything :func:`scan` reads (two C-speed passes)."""
    if text.find(_VIA_NET, 0, end) >= 0:
        return True
    return _FACT_TEXT.search(text, 0, end) is not None


@dataclass(slots=True)
class Topology:
    """The topology facts of one run, as they are seen."""

    network: str | None = None  # first `Using network X`
    p2p: str | None = None  # first `P2P plugin [vN] X`
    channel_net: str | None = None  # first `via NET/<name>/...`
    devices: dict[str, list[str]] = field(default_factory=dict)  # transport -> NICs
    # ofi, net_channels, gdr, nvls, no_nvls, collnet_connected, collnet, no_collnet,
    # collnet_missing (no CollNet plugin symbol), collnet_loaded (CollNet plugin)
    flags: set[str] = field(default_factory=set)
    local_ranks: int | None = None  # max of `localRanks P`
    nnodes: int | None = None  # max of `nNodes Q`
    last: Facts | None = None  # the facts added last: the same again adds nothing

    def add(self, facts: Facts) -> None:
        """Add what a text stated (:func:`scan`), after what was seen before it."""
        if facts == self.last:
            return
        self.last = facts
        texts, channel_net, gdr = facts
        for text in texts:
            self._add(text)
        if channel_net is not None:
            self.flags.add("net_channels")
            self.channel_net = self.channel_net or channel_net or None
            if gdr:
                self.flags.add("gdr")

    def _add(self, text: str) -> None:
        read = _READ.get(text)
        if read is None:
            read = _read(text)
            if len(text) <= _READ_LONGEST:
                if len(_READ) >= _READ_MAX:
                    _READ.clear()
                _READ[text] = read
        kind, value = read
        if kind == "flag":
            self.flags.add(value)
        elif kind == "nics":
            transport, nics = value
            if transport not in self.devices and len(self.devices) < _MAX_TRANSPORTS:
                self.devices[transport] = list(nics)
        elif kind == "network":
            self.network = self.network or value
        elif kind == "p2p":
            self.p2p = self.p2p or value
        else:
            self.nnodes = max(self.nnodes or 0, value[0])
            self.local_ranks = max(self.local_ranks or 0, value[1])

    def merge(self, other: Topology) -> None:
        """Add what ``other`` saw, after what this one saw (first names win)."""
        self.network = self.network or other.network
        self.p2p = self.p2p or other.p2p
        self.channel_net = self.channel_net or other.channel_net
        for transport, nics in other.devices.items():
            if transport not in self.devices and len(self.devices) < _MAX_TRANSPORTS:
                self.devices[transport] = nics
        self.flags |= other.flags
        if other.nnodes is not None:
            self.nnodes = max(self.nnodes or 0, other.nnodes)
        if other.local_ranks is not None:
            self.local_ranks = max(self.local_ranks or 0, other.local_ranks)
        self.last = None

    def net(self) -> str | None:
        """`Using network` first, then the OFI provider, NIC list and channel lines."""
        if self.network:
            name = canonical_net(self.network)
        elif "ofi" in self.flags:
            return "OFI"
        elif self.devices:
            name = canonical_net(next(iter(self.devices)))
        elif self.channel_net:
            name = canonical_net(self.channel_net)
        else:
            return None
        if name.startswith(_WRAPPERS):
            if self.p2p:
                return canonical_net(self.p2p)
            if "IB" in self.devices:
                return "IB"
        return name

    def columns(self) -> dict[str, Any]:
        """The runs-table columns these facts give (schema.md, "runs")."""
        net = self.net()
        nics = next(
            (
                list(names)
                for transport, names in self.devices.items()
                if canonical_net(transport) == net
            ),
            [],
        )
        flags = self.flags
        return {
            "net": net,
            "nics": nics,
            "gdr": _said(flags, "gdr", "net_channels"),
            "nvls": _said(flags, "nvls", "no_nvls"),
            "collnet": self.collnet(),
            "local_ranks": self.local_ranks,
        }

    def collnet(self) -> bool | None:
        """Connected > no plugin to do it > NCCL_COLLNET_ENABLE and the like."""
        flags = self.flags
        if "collnet_connected" in flags:
            return True
        if "collnet_missing" in flags and "collnet_loaded" not in flags:
            return False  # no CollNet plugin: CollNet cannot be on
        return _said(flags, "collnet", "no_collnet")


def _said(flags: set[str], yes: str, no: str) -> bool | None:
    """True if ``yes`` was seen, else False if ``no`` was, else None."""
    return True if yes in flags else (False if no in flags else None)


def read_topology(text: str) -> dict[str, Any]:
    """The columns a whole text gives, as if it were one run (tests, tools)."""
    topology = Topology()
    facts = scan(text)
    if facts is not None:
        topology.add(facts)
    return {**topology.columns(), "nnodes": topology.nnodes}
