"""Structured control flow: ``cond``/``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``map``.

Each is a higher-order primitive whose params carry the traced bodies as ClosedJaxprs with no
consts: values the bodies close over travel as ordinary operands (``consts_as_args``), so an
enclosing transformation sees them like any other input.

| primitive | operands | params |
| --- | --- | --- |
| ``cond`` | index, *ops | ``branches``: one jaxpr per branch, each taking ops |
| ``while`` | *cond_consts, *body_consts, *carry | ``cond_jaxpr``, ``body_jaxpr``, ``cond_nconsts``, ``body_nconsts`` |
| ``scan`` | *consts, *carry, *xs | ``jaxpr`` (consts, carry, x -> carry, y), ``num_consts``, ``num_carry``, ``length``, ``reverse``, ``unroll`` |

``cond`` lowers to ``stablehlo.case``, ``while`` to ``stablehlo.while`` and ``scan`` to a
``while`` whose body slices ``xs`` and writes ``ys`` at the loop counter. The eager interpreter
compiles each application as one executable; traced bodies are interned by structure so that
re-running eager control flow with a fresh lambda reuses the compiled executable.

| module | holds |
| --- | --- |
| ``common`` | tracing user functions to bodies, interning them, carry checks, Jaxpr surgery |
| ``conditionals`` | ``cond_p``, its rules, ``cond``, ``switch`` |
| ``loops`` | ``while_p``, its rules, ``while_loop``, ``fori_loop`` |
| ``scans`` | ``scan_p``, its shape and batching rules, ``scan``, ``map``, ``associative_scan`` |
| ``scan_lowering`` | ``scan`` lowered to a ``while`` loop with dynamic slices |
| ``scan_reverse`` | ``scan``'s jvp and transpose (reverse mode) |
"""
from funcgrad.lax.control_flow.conditionals import cond, cond_p, switch
from funcgrad.lax.control_flow.scans import associative_scan, map, scan, scan_p
from funcgrad.lax.control_flow.loops import fori_loop, while_loop, while_p
# Imported for their rule registrations on scan_p.
from funcgrad.lax.control_flow import scan_lowering, scan_reverse  # noqa: F401

__all__ = ["associative_scan", "cond", "cond_p", "fori_loop", "map", "scan", "scan_p", "switch",
           "while_loop", "while_p"]
