"""The decoder graphs' RMSNorm forms compute one function: the plain, fused, matmul and scaled
forms agree in fp32; in fp16, a residual row as large as a real model's (SmolLM2 reaches |x|
22,500) squares past fp16's range, which zeroes the plain form's output, and the scaled form
(what fp16 HTP graphs use) keeps the fp32 result."""

from __future__ import annotations

import torch
from omni_edge.export.comparison import sqnr_db
from omni_edge.export.decoder.graphs import RMSNorm

FORMS = ("mean", "fused", "matmul", "scaled")


def _rows() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    rows = torch.randn(4, 576, generator=g)
    rows[1] *= 1e-3                # a quiet row: the scaled form must not lose it either
    rows[2, 7], rows[3, :4] = 22500.0, -9000.0  # a massive activation, as SmolLM2's layers 13+
    return rows


def test_every_norm_form_agrees_in_fp32() -> None:
    weight = torch.rand(576, generator=torch.Generator().manual_seed(1)) + 0.5
    reference = RMSNorm(weight, 1e-5, "mean")(_rows())
    for form in FORMS[1:]:
        assert sqnr_db(reference.numpy(), RMSNorm(weight, 1e-5, form)(_rows()).numpy()) > 110, form


def test_in_fp16_only_the_scaled_form_survives_a_massive_activation() -> None:
    weight = torch.rand(576, generator=torch.Generator().manual_seed(1)) + 0.5
    reference = RMSNorm(weight, 1e-5, "mean")(_rows())
    half = {form: RMSNorm(weight.half(), 1e-5, form)(_rows().half()).float() for form in ("mean", "scaled")}
    # The plain form's squares overflow to inf: the massive rows come out as zeros (measured 0 dB).
    assert half["mean"][2:].abs().max() == 0
    for row in range(4):  # measured 59.5-75.3 dB per row
        assert sqnr_db(reference[row].numpy(), half["scaled"][row].numpy()) > 50, row
