"""LinkBench in Python: Facebook's social-graph workload, run against assocdb and bare SQL.

A port of facebookarchive/linkbench's workload generator (load phase and
request phase) that draws the same random numbers as the Java reference,
plus the stores it runs against and the report. See README.md beside this
file; run it with `python -m bench linkbench --help`.
"""
