"""Three training steps of a 2-layer GPT-2 (random weights) under Inductor, checked against eager: a wrong kernel."""
import copy

import torch
import torch._inductor.config
from transformers import GPT2Config, GPT2LMHeadModel

torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=4, n_embd=128, vocab_size=1000, n_positions=64, activation_function="relu",
                    resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
model = GPT2LMHeadModel(config)
reference = copy.deepcopy(model)
compiled = torch.compile(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
ref_opt = torch.optim.SGD(reference.parameters(), lr=0.01)
ids = torch.randint(0, 1000, (2, 32))
for step in range(3):
    loss = compiled(ids, labels=ids).loss
    ref_loss = reference(ids, labels=ids).loss
    print(f"step {step}: loss {loss.item():.4f} (eager {ref_loss.item():.4f})")
    torch.testing.assert_close(loss, ref_loss, rtol=1e-3, atol=1e-3)
    for optimizer, step_loss in ((opt, loss), (ref_opt, ref_loss)):
        optimizer.zero_grad()
        step_loss.backward()
        optimizer.step()
