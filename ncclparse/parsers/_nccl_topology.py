"""What NCCL_DEBUG=INFO says about the topology (network, NICs, GDR, NVLS, CollNet)
and about the algorithms: the environment NCCL read, the tuner plugin, the
Func/Proto/Algo matrix and the per-call algorithm/protocol choices (TUNING).

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
       | CCL_[A-Z0-9_]{1,64}\ set\ by\ environment\ to\ [^\r\n]{0,256})
  | Using\ (?:network\ [^\r\n]+|tuner\ plugin:?\ [^\r\n]{1,128})
  | TUNER/Plugin:\ (?:Using\ [^\r\n]{1,128}|[^\r\n]{0,160}[Uu]sing\ internal\ tuner)
  | Enabled\ NCCL\ Func/Proto/Algo\ Matrix
  | (?:[A-Za-z]{1,32}:\ {0,16})?\d{1,19}\ Bytes\ ->\ Algo\ {1,4}
    (?:\d{1,3}\ proto\ \d{1,3}
       | \w{1,32}\ {1,4}proto\ \w{1,16}\ channel\{Lo\.\.Hi\}=\{\d{1,9}\.\.\d{1,9}\})
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
      | (?:TUNER/Plugin:\ Using\ (?:tuner\ plugin\ )?|Using\ tuner\ plugin:?\ )
        (?P<tuner>.+)
      | TUNER/Plugin:\ (?P<tunerint>.+)
      | (?P<matrix>Enabled\ NCCL)
      | (?:(?P<tfunc>[A-Za-z]+):\ *)?(?P<tbytes>\d+)\ Bytes\ ->\ Algo\ +(?P<talgo>\w+)
        \ +proto\ (?P<tproto>\w+)
        (?:\ channel\{Lo\.\.Hi\}=\{(?P<tlo>\d+)\.\.(?P<thi>\d+)\})?
      | (?P<hca2>GPU\ Direct\ RDMA\ Enabled)
      | NVLS\ (?:multicast\ support\ is\ (?P<nvls>.+)|(?P<nvlsuse>comm))
      | (?:rank\ \d+\ )?Connected\ (?:(?P<nvlsuse2>NVLS)|(?P<cnon>.+))
      | \d+\ coll\ channels,\ (?:\d+\ collnet\ channels,\ )?(?P<nvlsch>\d+)
      | comm\ .*\ nNodes\ (?P<nn>\d+)\ localRanks\ (?P<lr>\d+)
      | P2P\ plugin\ (?:v\d+\ )?(?P<p2p>.+)
      | (?P<env>NCCL_\w+)\ set\ by\ environment\ to\ (?P<envv>.*)
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
    if g.get("env"):
        return "env", (g["env"], _env_value(g["envv"]))
    if g.get("tbytes"):
        return "tuned", _choice(g)
    if g.get("tuner"):
        name = g["tuner"].strip().strip("'\"")
        return "tuner", "internal" if name.startswith("internal tuner") else name
    if g.get("tunerint"):
        return "tuner", "internal"
    if g.get("matrix"):
        return "flag", "matrix"
    if g.get("p2p"):
        return "p2p", g["p2p"].strip()
    if g.get("nn"):
        return "nodes", (int(g["nn"]), int(g["lr"]))
    if g.get("nvlsch"):
        return "nvls_channels", int(g["nvlsch"])
    if g.get("nvls") or g.get("nvlsuse") or g.get("nvlsuse2"):
        off = g.get("nvls") == "not available"
        return "flag", "no_nvls" if off else "nvls"
    if g.get("cnload"):
        return "flag", "collnet_loaded"
    if g.get("cnmiss"):
        return "flag", "collnet_missing"
    if g.get("cnon") or g.get("cnon2"):
        return "flag", "collnet_connected"
    value = g.get("supv") or g.get("cnst") or ""
    off = value == "0" or "not " in value or "disabled" in value
    if g.get("sup") == "nvls":
        return "flag", "no_nvls" if off else "nvls"
    return "flag", "no_collnet" if off else "collnet"


# NCCL's algorithm and protocol names (ncclAlgoStr, ncclProtoStr), by their index:
# what TUNING lines before v2.24 print; later ones print upper-case names
# (`RING`, `SIMPLE`, `NVLS_TREE`), read back to these.
ALGORITHMS = (
    "Tree",
    "Ring",
    "CollNetDirect",
    "CollNetChain",
    "NVLS",
    "NVLSTree",
    "PAT",
)
PROTOCOLS = ("LL", "LL128", "Simple")
_ALGORITHM = {name.upper(): name for name in ALGORITHMS}
_PROTOCOL = {name.upper(): name for name in PROTOCOLS}
# ncclFuncStr names, as the schema names the collectives.
COLLECTIVES = {
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "AllReduce": "all_reduce",
}
_MAX_ENV, _MAX_TUNED = 64, 4096
# A per-call choice: (collective, bytes, algorithm, protocol, channels).
Choice = tuple[str | None, int, str, str, int | None]


def _name(word: str, names: tuple[str, ...], by_upper: dict[str, str]) -> str:
    """NCCL's name for an algorithm or protocol printed as an index or a name."""
    if word.isdigit():
        index = int(word)
        return names[index] if index < len(names) else word
    return by_upper.get(word.upper().replace("_", ""), word)


def _choice(g: dict[str, Any]) -> Choice:
    lo, hi = g.get("tlo"), g.get("thi")
    func = g.get("tfunc")
    return (
        COLLECTIVES.get(func, func) if func else None,
        int(g["tbytes"]),
        _name(g["talgo"], ALGORITHMS, _ALGORITHM),
        _name(g["tproto"], PROTOCOLS, _PROTOCOL),
        int(hi) - int(lo) + 1 if lo is not None and hi is not None else None,
    )


def _env_value(value: str) -> str:
    """The value of a `set by environment to` line: integer parameters end with a
    full stop (`NCCL_NVLS_ENABLE set by environment to 0.`), strings do not."""
    value = value.strip()
    if value.endswith(".") and value[:-1].lstrip("-").isdigit():
        return value[:-1]
    return value


def normalise_list(value: str, names: tuple[str, ...]) -> str:
    """An NCCL_ALGO / NCCL_PROTO value with NCCL's spelling of each name it knows
    (matched as NCCL matches them, ignoring case): ``ring,TREE`` gives ``Ring,Tree``,
    ``^nvls`` gives ``^NVLS``, ``allreduce:tree;broadcast:ring`` gives
    ``AllReduce:Tree;Broadcast:Ring``. Blanks are dropped; unknown names are kept."""
    by_upper = {name.upper(): name for name in names}
    funcs = {name.upper(): name for name in COLLECTIVES}
    parts = []
    for part in "".join(value.split()).split(";"):
        func, colon, items = part.rpartition(":")
        func = funcs.get(func.upper(), func)
        negate = items.startswith("^")
        words = items[1:] if negate else items
        spelled = ",".join(by_upper.get(w.upper(), w) for w in words.split(","))
        parts.append(f"{func}{colon}{'^' if negate else ''}{spelled}")
    return ";".join(parts)


# The `Enabled NCCL Func/Proto/Algo Matrix` (v2.24+, ENV, rank 0, when NCCL_ALGO or
# NCCL_PROTO is set) is printed as one message with line breaks: its header and rows
# reach the parser as lines of their own, without NCCL's prefix.
MATRIX_HEADER = re.compile(
    r"Function *\|(?P<protocols>[ \w]{1,256})\|(?P<algorithms>[ \w]{1,512})", re.ASCII
)
MATRIX_ROW = re.compile(
    r"(?P<function>[A-Za-z]{1,32}) *\|(?P<protocols>[ \d]{1,256})"
    r"\|(?P<algorithms>[ \d]{1,512})",
    re.ASCII,
)


def matrix_header(text: str) -> tuple[list[str], list[str]] | None:
    """The protocol and algorithm names of a matrix header line, or None."""
    match = MATRIX_HEADER.fullmatch(text)
    if match is None:
        return None
    return match.group("protocols").split(), match.group("algorithms").split()


def matrix_row(
    text: str, names: tuple[list[str], list[str]] | None
) -> tuple[str, list[str], list[str]] | None:
    """A matrix row's function and the protocols and algorithms it enables (value
    not 0: 1 on, 2 LL128 left to NCCL's topology check), or None when ``text`` is
    not a row of a matrix with these column ``names`` (NCCL's, when no header was
    read)."""
    match = MATRIX_ROW.fullmatch(text)
    if match is None:
        return None
    protocols, algorithms = names or (list(PROTOCOLS), list(ALGORITHMS))
    values = match.group("protocols").split(), match.group("algorithms").split()
    if (len(values[0]), len(values[1])) != (len(protocols), len(algorithms)):
        return None
    return (
        match.group("function"),
        [p for p, v in zip(protocols, values[0], strict=True) if int(v)],
        [a for a, v in zip(algorithms, values[1], strict=True) if int(v)],
    )


# `NCCL_ALGO=Ring` / `NCCL_PROTO=Simple` in a command line the log echoes (`-x
# NCCL_ALGO=Ring`, `NCCL_ALGO=Tree ./build/all_reduce_perf`, `export NCCL_ALGO=...`).
_SETTING = re.compile(
    r"(?<![\w.-])(?P<name>NCCL_(?:ALGO|PROTO))=(?P<value>\"[^\"]{0,256}\"|'[^']{0,256}'|[^\s;&|]{1,256})",
    re.ASCII,
)


def command_settings(text: str) -> dict[str, str]:
    """The NCCL_ALGO / NCCL_PROTO values ``text`` sets (quotes removed; the last
    one wins, as in a shell)."""
    found = {}
    for match in _SETTING.finditer(text):
        value = match.group("value").strip("\"'").strip()
        if value:
            found[match.group("name")] = value
    return found


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
_HINT = re.compile(r"L INFO (?:N[ECV]|Us|GP|[Cc]o|ra|P2|nv|[1-9]|En|TU)", re.ASCII)
# TUNING choice lines begin with a collective's name (`AllReduce: 4 Bytes -> Algo`),
# as the COLL lines do that are printed for every call: they are told by this.
_TUNED = " Bytes -> Algo "


def scan_line(text: str) -> Facts | None:
    """:func:`scan` for one line, cheaper: most lines are told apart by their start."""
    if _VIA_NET in text:
        return scan(text)
    if _HINT.search(text) is None and _TUNED not in text:
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
    nvls_channels: int | None = None  # max of `N nvls channels`
    env: dict[str, str] = field(default_factory=dict)  # `NCCL_X set by environment`
    tuners: list[str] = field(default_factory=list)  # tuner plugins named, in order
    matrix: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    tuned: set[Choice] = field(default_factory=set)  # distinct TUNING choices
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
        elif kind == "env":
            self._env(*value)
        elif kind == "tuned":
            if len(self.tuned) < _MAX_TUNED:
                self.tuned.add(value)
        elif kind == "tuner":
            if value not in self.tuners and len(self.tuners) < _MAX_TRANSPORTS:
                self.tuners.append(value)
        elif kind == "nvls_channels":
            self.flags.add("nvls" if value else "no_nvls")
            self.nvls_channels = max(self.nvls_channels or 0, value)
        else:
            self.nnodes = max(self.nnodes or 0, value[0])
            self.local_ranks = max(self.local_ranks or 0, value[1])

    def _env(self, name: str, value: str) -> None:
        if name not in self.env and len(self.env) < _MAX_ENV:
            self.env[name] = value
        if name == "NCCL_COLLNET_ENABLE" and value.isdigit():
            self.flags.add("no_collnet" if value == "0" else "collnet")

    def add_matrix_row(
        self, function: str, protocols: list[str], algorithms: list[str]
    ) -> None:
        """A row of the `Enabled NCCL Func/Proto/Algo Matrix` (the first of each
        function counts): the protocols and algorithms it enables."""
        collective = COLLECTIVES.get(function, function)
        if collective not in self.matrix and len(self.matrix) < _MAX_TRANSPORTS:
            self.matrix[collective] = (protocols, algorithms)
        self.last = None

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
        if other.nvls_channels is not None:
            self.nvls_channels = max(self.nvls_channels or 0, other.nvls_channels)
        for name, value in other.env.items():
            self._env(name, value)
        for tuner in other.tuners:
            if tuner not in self.tuners and len(self.tuners) < _MAX_TRANSPORTS:
                self.tuners.append(tuner)
        for collective, row in other.matrix.items():
            self.matrix.setdefault(collective, row)
        self.tuned |= set(list(other.tuned)[: max(0, _MAX_TUNED - len(self.tuned))])
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
            "nvls_channels": self.nvls_channels,
            "nccl_env": dict(self.env),
            "tuner": self.tuner(),
            "enabled": [
                {"collective": c, "protocols": p, "algorithms": a}
                for c, (p, a) in self.matrix.items()
            ],
            "tuned": [
                {
                    "collective": c,
                    "nccl_bytes": n,
                    "algorithm": a,
                    "protocol": p,
                    "channels": ch,
                }
                for c, n, a, p, ch in sorted(self.tuned, key=_choice_order)
            ],
        }

    def tuner(self) -> str | None:
        """The external tuner plugin named first, else `internal`, else None."""
        external = [t for t in self.tuners if t != "internal"]
        return external[0] if external else (self.tuners[0] if self.tuners else None)

    def collnet(self) -> bool | None:
        """Connected > no plugin to do it > NCCL_COLLNET_ENABLE and the like."""
        flags = self.flags
        if "collnet_connected" in flags:
            return True
        if "collnet_missing" in flags and "collnet_loaded" not in flags:
            return False  # no CollNet plugin: CollNet cannot be on
        return _said(flags, "collnet", "no_collnet")


def _choice_order(choice: Choice) -> tuple[str, int, str, str, int]:
    collective, size, algorithm, protocol, channels = choice
    return (
        collective or "",
        size,
        algorithm,
        protocol,
        -1 if channels is None else channels,
    )


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
