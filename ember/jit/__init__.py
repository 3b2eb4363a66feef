"""Tracing JIT: ``trace`` a function or Module into a let-binding IR (``Graph``), run it fast
through generated Python, optimise it with graph passes, save and load it without the model code.

    traced = ember.jit.trace(model, (x,))
    print(traced.graph)       # the IR text
    print(traced.code)        # the Python it runs
    fast = ember.jit.optimize(traced)
    ember.jit.save(fast, "model.ejit"); ember.jit.load("model.ejit")(x)

TorchScript's names (``script``, ``is_scripting``, ``ignore``, ...) are there for model code
that uses them, run as Python (``ember.jit.scripting``).
"""
from ember.jit.interpreter import Interpreter, run_forward
from ember.jit.ir import (ArrayRef, GenRef, Graph, GraphVisitor, LintError, Node, SymRef, Value,
                          parse)
from ember.jit.passes import optimize, register_pass, run_passes
from ember.jit.scripting import (Final, Future, annotate, export, fork, ignore, interface,
                                 is_scripting, is_tracing, isinstance, script, script_if_tracing,
                                 unused, wait)
from ember.jit.serialization import load, register_function, save
from ember.jit.traced import TracedFunction, TracedModule, TracingCheckError, trace
from ember.jit.tracer import SymInt, Tracer, TracerWarning, TracingError

__all__ = ["trace", "optimize", "save", "load", "Graph", "Node", "Value", "GraphVisitor",
           "parse", "SymRef", "GenRef", "ArrayRef", "LintError", "Interpreter", "run_forward",
           "TracedFunction", "TracedModule", "TracerWarning", "TracingError",
           "TracingCheckError", "Tracer", "SymInt", "register_pass", "run_passes",
           "register_function", "script", "is_scripting", "is_tracing", "ignore", "unused",
           "export", "Final", "annotate", "interface", "script_if_tracing", "fork", "wait",
           "Future", "isinstance"]
