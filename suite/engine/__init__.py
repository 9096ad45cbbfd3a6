"""The suite's engine: the run's configuration, the probe and the gate, fixtures and the client every test talks
through, results and expectations. The plugin (``tokenspec.suite.plugin``) drives it; nothing here imports the
plugin."""
