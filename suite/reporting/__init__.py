"""The suite's reports: report.json, summary.md and report.html, failures grouped by cause, and what a run never
judged and why."""
