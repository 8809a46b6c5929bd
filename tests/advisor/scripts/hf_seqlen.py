"""A tiny Hugging Face BERT (random weights) called with changing sequence lengths and dynamic=False."""
import torch
from transformers import BertConfig, BertModel

config = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)
model = BertModel(config).eval()
compiled = torch.compile(model, backend="eager", dynamic=False)
with torch.no_grad():
    for seq_len in (8, 9, 10, 11):
        input_ids = torch.randint(0, config.vocab_size, (2, seq_len))
        compiled(input_ids=input_ids)
