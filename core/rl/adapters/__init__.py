"""Thin adapters from KernelEnv (core/rl/env.py) to trainers' environment interfaces. Each imports
its library only when used, with an error that says how to install it; the core never needs
them."""
