"""Putting a runtime and a plan on a device: the deployment, cross-built bundles, the Android app, remote runs."""
