"""The input side: what the user named, turned into parsed tables.

:mod:`~ncclparse.inputs.walk` expands files, directories, URIs and standard input
into sources (saying what it skipped) and reads one side of a comparison;
:mod:`~ncclparse.inputs.parsing` parses many sources into one result, here or in
:mod:`~ncclparse.inputs.workers` processes, with a
:mod:`~ncclparse.inputs.progress` line; :mod:`~ncclparse.inputs.points` merges
repeated points so that judging stays in bounded memory;
:mod:`~ncclparse.inputs.lake` runs the parser inside PySpark and Dask.
"""
