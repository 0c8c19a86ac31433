"""The actor runtime: ``@remote_class`` on a local pool of processes that share memory.

This package never imports paddle: a program that only wants parallel actors does not pay for it.
"""
