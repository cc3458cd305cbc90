"""ExecuTorch programs: every graph of a component is one method of a single `.pte`, lowered
with the XNNPACK partitioner. Methods share their weights inside the program (XNNPACK keys
constants by content), inputs are left unplanned so the runtime reads caller buffers in place,
and `placement.json` records, per method, how many calls went to a delegate and how many stay
on ExecuTorch's CPU kernels."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from omni_edge.files import write_bytes_atomic, write_text_atomic


def delegation_facts(pte: bytes) -> dict[str, dict[str, Any]]:
    """Per method: delegate calls by backend and CPU kernel calls by operator, from the program itself."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import DelegateCall, KernelCall

    program = deserialize_pte_binary(pte).program
    facts: dict[str, dict[str, Any]] = {}
    for plan in program.execution_plan:
        delegates: collections.Counter[str] = collections.Counter()
        kernels: collections.Counter[str] = collections.Counter()
        for chain in plan.chains:
            for instruction in chain.instructions:
                args = instruction.instr_args
                if isinstance(args, DelegateCall):
                    delegates[plan.delegates[args.delegate_index].id] += 1
                elif isinstance(args, KernelCall):
                    op = plan.operators[args.op_index]
                    kernels[op.name + (f".{op.overload}" if op.overload else "")] += 1
        facts[plan.name] = {"delegate_calls": sum(delegates.values()), "delegates": dict(delegates),
                            "cpu_kernel_calls": sum(kernels.values()), "cpu_kernels": dict(sorted(kernels.items()))}
    return facts


def export_program(methods: dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]], path: Path,
                   progress: tqdm | None = None) -> dict[str, dict[str, Any]]:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass
    from torch.export import export

    programs = {}
    with torch.no_grad():
        for name, (module, example) in methods.items():
            if progress is not None:
                progress.set_postfix_str(name)
            programs[name] = export(module, example, strict=False)
            if progress is not None:
                progress.update()
    if progress is not None:
        progress.set_postfix_str("lowering to XNNPACK")
    edge = to_edge_transform_and_lower(programs, partitioner=[XnnpackPartitioner()])
    program = edge.to_executorch(ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)))
    data = program.buffer
    write_bytes_atomic(path, data)
    facts = delegation_facts(data)
    write_text_atomic(path.parent / "placement.json", json.dumps(facts, indent=1) + "\n")
    return facts


class MethodSession:
    """One method of a program through ExecuTorch's runtime, with the `run(None, feeds)` call of an
    ONNX Runtime session, so one check reads both routes."""

    def __init__(self, program: Path, method: str) -> None:
        from executorch.runtime import Runtime

        self.method = Runtime.get().load_program(str(program)).load_method(method)

    def run(self, _outputs: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The outputs, copied: the method's next call writes its planned output buffers again.
        Inputs go by position: `feeds` in the method's input order."""
        return [t.numpy().copy() for t in self.method.execute([torch.from_numpy(v) for v in feeds.values()])]
