"""workplace-env: a gRPC environment server for the workplace assistant (WorkBench) benchmark."""

__version__ = "0.1.0"
