"""``primflow.compat``: other frameworks' names over primflow, for code written for them.

``primflow.compat.mindspore`` maps MindSpore's names (``import mindspore`` becomes
``import primflow.compat.mindspore as mindspore``); Paddle code needs no such module, it
runs with ``import primflow as paddle``.
"""
