"""tokenspec: conformance suite and reference harness for token-in/token-out LLM serving APIs.

The pipeline under test is ``request --render--> token_ids --generate--> token_ids --derender--> response``.
Sub-packages: ``tokenspec.specs`` (OpenAPI documents + requirement catalogue), ``tokenspec.suite``
(conformance tests run against any URL), ``tokenspec.harness`` (the bundled reference server and the
embedded tiny model), ``tokenspec.golden`` (golden cases).
"""

__version__ = "0.1.0"
