"""Campaigns: runs of many suite runs or many servers, built from the layers below.

The implementation matrix, the golden files and their corpus, the parser table, parity traffic and the mutant
campaign. Each starts servers (``tokenspec.harness``) and runs the suite (``tokenspec.suite``) as a user would;
none is imported by either.
"""
