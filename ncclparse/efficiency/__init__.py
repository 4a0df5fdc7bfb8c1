"""The efficiency engine: how far a measured sweep is from what the hardware allows.

:func:`analyze` adds recomputed bandwidths, the ideal bus bandwidth, efficiency,
alpha-beta fits and the gap attribution to a ``measurements`` table. The pieces:
:mod:`~ncclparse.efficiency.bandwidth` (algbw/busbw recomputed from size and time),
:mod:`~ncclparse.efficiency.ideal` (the ideal bus bandwidth of a topology),
:mod:`~ncclparse.efficiency.fits` (alpha-beta fits per series),
:mod:`~ncclparse.efficiency.costmodels` (predicted times of collective algorithms) and
:mod:`~ncclparse.efficiency.hardware` (profiles: presets, TOML files, overrides).
The arithmetic is written up in ``docs/efficiency.md``.
"""

from ncclparse.efficiency.analysis import ANALYSED_COLUMNS, Analysis, analyze
from ncclparse.efficiency.bandwidth import bandwidth_columns, busbw_factor
from ncclparse.efficiency.fits import FIT_CLASSES, FIT_COLUMNS
from ncclparse.efficiency.hardware import HardwareOptions, HardwareProfile
from ncclparse.efficiency.ideal import IdealBandwidth, ideal_bandwidth, ideal_busbw

__all__ = [
    "ANALYSED_COLUMNS",
    "FIT_CLASSES",
    "FIT_COLUMNS",
    "Analysis",
    "HardwareOptions",
    "HardwareProfile",
    "IdealBandwidth",
    "analyze",
    "bandwidth_columns",
    "busbw_factor",
    "ideal_bandwidth",
    "ideal_busbw",
]
