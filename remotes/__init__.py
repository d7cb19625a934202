"""Devices reached over SSH (a later issue): hosts file, upload, run, stream."""
