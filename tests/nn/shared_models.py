"""Model code written once and built with either ``torch.nn`` or ``funcgrad.nn``: the parity
tests change only the ``nn`` module passed in."""


def lenet(nn):
    F = nn.functional

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
            self.bn1 = nn.BatchNorm2d(6)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.pool = nn.MaxPool2d(2)
            self.fc1 = nn.Linear(16 * 5 * 5, 32)
            self.ln = nn.LayerNorm(32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, x):
            x = self.pool(F.relu(self.bn1(self.conv1(x))))
            x = F.avg_pool2d(F.relu(self.conv2(x)), 2)
            x = x.reshape(x.shape[0], -1)
            x = F.gelu(self.ln(self.fc1(x)))
            return self.fc2(x)

    return LeNet()


def lstm_lm(nn):
    F = nn.functional

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8, padding_idx=0)
            self.lstm = nn.LSTM(8, 12, num_layers=2, batch_first=True, bidirectional=True)
            self.gru = nn.GRU(24, 6, batch_first=True)
            self.head = nn.Linear(6, 20)

        def forward(self, idx):
            h, _ = self.lstm(self.emb(idx))
            h, _ = self.gru(h)
            return F.log_softmax(self.head(h), dim=-1)

    return LM()


def attention_block(nn):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0,
                                                  batch_first=True)
            self.gn = nn.GroupNorm(2, 16)

        def forward(self, x):
            y = self.enc(x)
            return self.gn(y.swapaxes(1, 2)).swapaxes(1, 2)

    return Block()
