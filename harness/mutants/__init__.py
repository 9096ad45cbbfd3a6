"""Judging the suite: a proxy that plants one realistic defect at a time, and the campaign that measures
which tests catch each (``tokenspec mutants``)."""
