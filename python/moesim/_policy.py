"""Policies written in Python: subclass Cache, Prefetcher or Scheduler.

The engine calls the hooks of policies/policy.h in the same order as for a
policy written in C; each hook gets a :class:`moesim.View` (the functions of
policies/view.h, valid only during the hook) and the ids it concerns.  Only
the hooks a class defines are called: a missing one behaves as a C policy's
NULL hook (``admit`` missing: always admit).  See docs/python.md.
"""
import inspect

from . import _core
from ._core import ArgumentError

_KINDS = {"prefetch": 0, "cache": 1, "sched": 2}
_READS = {"gate": 1 | 2, "embed": 4, "spec": 8}
_ORDERS = ("first", "token", "ascending", "hits_first", "hits_first_gather")
_PROTECTS = ("step", "list", "none")
_V, _VL, _VLE = ("view",), ("view", "l"), ("view", "l", "e")


class _Policy:
    #: the name runs and sweeps know it by (default: the class name)
    name = None
    #: parameters and their defaults (int or float): ``cache="mylru:k=3"`` sets k;
    #: a class gets them as keyword arguments of its constructor
    params = {}
    #: the request parts the hooks read besides the top-k ids: "gate" (View.gate), "embed", "spec"
    reads = ()
    needs_future = False   # View.next_use: the engine's next-use pre-pass
    needs_weights = False  # reads router weights: refused on a trace of expert ids only
    uses_distance = False  # reads the prefetch distance
    uses_training = False  # learns from the training split (--train auto becomes 0.7)
    _kind = None
    _hooks = {}            # hook name -> the names of its arguments after self


class Cache(_Policy):
    """A cache policy: implement ``victim(view)`` (return ``(layer, expert)`` of
    an expert for which ``view.evictable`` holds, or None) and any of
    ``admit, on_insert, on_access, on_evict, full, protects, overflow``
    ``(view, l, e)`` and ``on_gate(view, l)``."""
    #: the order of a layer step's lookups: first, token, ascending, hits_first, hits_first_gather
    step_order = "first"
    #: what a step keeps from eviction: step, list (the protects hook), none
    step_protect = "step"
    cpu_hits_untouched = False
    #: with step_protect list or none: look each expert up at its turn, not at the gate (eam:mode=code)
    lookup_at_turn = False
    _kind = "cache"
    _hooks = {"admit": _VLE, "on_insert": _VLE, "on_access": _VLE, "on_evict": _VLE, "on_gate": _VL,
              "victim": _V, "full": _VLE, "protects": _VLE, "overflow": _VLE, "create": ("env",)}


class Prefetcher(_Policy):
    """A prefetcher: any of ``on_iteration(view)``, ``on_layer_start(view, l)``,
    ``on_gate(view, l)``, ``before_loads(view, l)``, ``on_iteration_end(view)``
    and ``state_bytes()``; it acts with ``view.prefetch(l, e, priority)``."""
    _kind = "prefetch"
    _hooks = {"on_iteration": _V, "on_layer_start": _VL, "on_gate": _VL, "before_loads": _VL,
              "on_iteration_end": _V, "state_bytes": (), "create": ("env",)}


class Scheduler(_Policy):
    """A scheduler: ``place(view, l, acts, cached)`` returns one truth value per
    activated expert (``acts``: ``(expert, tokens, weight_sum)``), True to run
    it on the CPU."""
    _kind = "sched"
    _hooks = {"place": ("view", "l", "acts", "cached"), "create": ("env",)}


def _policy_class(p):
    cls = p if isinstance(p, type) else type(p)
    if not (isinstance(cls, type) and issubclass(cls, _Policy) and cls._kind):
        return None
    return cls


def policy_name(cls):
    return cls.name if cls.name else cls.__name__


def _check_hooks(cls, who):
    defined = []
    for hook, names in cls._hooks.items():
        fn = getattr(cls, hook, None)
        if fn is None:
            continue
        if not callable(fn):
            raise ArgumentError(f"{who}: hook {hook} is not callable")
        try:
            inspect.signature(fn).bind(None, *([None] * len(names)))
        except TypeError:
            want = ", ".join(("self",) + names)
            raise ArgumentError(f"{who}: hook {hook}{inspect.signature(fn)} does not take ({want})") from None
        except ValueError:
            pass  # no signature to read (a builtin): called as is
        if hook != "create":
            defined.append(hook)
    if cls._kind == "cache" and "victim" not in defined:
        raise ArgumentError(f"{who}: a cache policy needs a victim(view) hook")
    if cls._kind == "sched" and "place" not in defined:
        raise ArgumentError(f"{who}: a scheduler needs a place(view, l, acts, cached) hook")
    return defined


def _attrs(cls, who, defined):
    params = []
    if not isinstance(cls.params, dict):
        raise ArgumentError(f"{who}: params must be a dict of name -> default number")
    for k, v in cls.params.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise ArgumentError(f"{who}: parameter name {k!r} is not an identifier")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ArgumentError(f"{who}: parameter {k} = {v!r}: expected an int or float default")
        params.append((k, "int" if isinstance(v, int) else "float", repr(v)))
    reads = 0
    for r in cls.reads:
        if r not in _READS:
            raise ArgumentError(f"{who}: reads {r!r}: expected gate, embed or spec")
        reads |= _READS[r]
    a = {"hooks": tuple(defined), "params": params, "reads": reads,
         "needs_future": int(bool(cls.needs_future)), "needs_weights": int(bool(cls.needs_weights)),
         "uses_distance": int(bool(cls.uses_distance)), "uses_training": int(bool(cls.uses_training))}
    if cls._kind == "cache":
        if cls.step_order not in _ORDERS:
            raise ArgumentError(f"{who}: step_order {cls.step_order!r}: expected one of {', '.join(_ORDERS)}")
        if cls.step_protect not in _PROTECTS:
            raise ArgumentError(f"{who}: step_protect {cls.step_protect!r}: expected one of {', '.join(_PROTECTS)}")
        if cls.step_protect == "list" and "protects" not in defined:
            raise ArgumentError(f"{who}: step_protect 'list' needs a protects(view, l, e) hook")
        a.update(order=_ORDERS.index(cls.step_order), protect=_PROTECTS.index(cls.step_protect),
                 cpu_hits_untouched=int(bool(cls.cpu_hits_untouched)),
                 lookup_at_turn=int(bool(cls.lookup_at_turn)))
    return a


def register(policy):
    """Registers a policy class (a fresh object per run, built with its
    parameters) or object (the same object for every run) under its name and
    returns the name; runs and sweeps then also know it as ``"name:k=v"``."""
    cls = _policy_class(policy)
    if cls is None:
        raise ArgumentError(f"register: {policy!r} is not a moesim.Cache, Prefetcher or Scheduler (class or object)")
    name = policy_name(cls)
    who = f"{cls._kind} policy '{name}'"
    defined = _check_hooks(cls, who)
    attrs = _attrs(cls, who, defined)
    if isinstance(policy, type):
        factory = policy
    else:
        def factory(**kw):
            given = sorted(k for k, v in kw.items() if v != cls.params.get(k))
            if given:
                raise ArgumentError(f"{who}: parameters {given} set in a spec need a class, not an object")
            return policy
    _core.register_policy(_KINDS[cls._kind], name, factory, attrs)
    return name


def policy_spec(kind, value, key):
    """The text of a prefetch / cache / sched argument: a spec string, or a
    Python policy (registered on the way)."""
    if isinstance(value, str):
        return value
    cls = _policy_class(value)
    if cls is None:
        base = {"prefetch": "Prefetcher", "cache": "Cache", "sched": "Scheduler"}[kind]
        raise ArgumentError(f"run: {key}={value!r}: expected a policy spec 'name[:k=v,...]' or a moesim.{base}")
    if cls._kind != kind:
        raise ArgumentError(f"run: {key}={value!r}: a {cls._kind} policy, not a {kind} policy")
    return register(value)
