# %% [markdown]
# # 12 · Mock interview: answer first, then compare
#
# **How this session works** (about 20 minutes, alone)
# - **Part 1 · questions (about 12 minutes).** Six questions no lesson asked you, one per topic: constraints
#   to recall, trade-offs, diagnoses. Answer each in the box *as you would say it*, then reveal the model answer
#   and tick the points your answer covered. An interviewer then follows up ("why?", "what if…?"): answer those
#   too before you open their answers. *Reshuffle* draws them in another order.
# - **Part 2 · live tasks (about 8 minutes).** Three reports an on-device team files: "this model won't export",
#   "this `.pte` disagrees with eager on the phone", "the runtime rejects our camera frames". Each hides a pattern
#   from the lessons in a model with another name and another job (one of them has lesson 06's `TinyVision`
#   architecture): recognising the pattern is part of the task. Each is graded like the lessons' exercises: the real export, lowering and runtime,
#   compared with the original model in eager PyTorch. The export doctor (lesson 11) is at hand.
# - **Part 3 · summary.** Your score per topic and the lessons to revisit.
#
# Nothing here shows an answer before you act: model answers sit behind a button, solutions too.

# %%
import torch
import torch.nn.functional as F
from torch import nn
from torch.export import Dim

import helpers
from helpers import course, doctor, exercises
from helpers.display import show_source
from helpers.interview.session import MockInterview

tasks = course.lesson(12)  # this lesson's models and programs: helpers/lessons/12_mock_interview.py
FrameNormalizer, BatchStatsClassifier, GlyphNet = tasks.FrameNormalizer, tasks.BatchStatsClassifier, tasks.GlyphNet
shipped_batch_program, glyph_program = tasks.shipped_batch_program, tasks.glyph_program

g = torch.Generator().manual_seed(0)  # every random input below comes from this generator

# %% [markdown]
# ## Part 1 · questions
#
# Say your answer out loud or type it, *then* press **Reveal model answer**. Tick the points you really
# covered (be strict: an interviewer is). Answer each follow-up the same way before you open it, then **Next
# question**.

# %%
session = MockInterview(n=6, seed=0)
session

# %% [markdown]
# ## Part 2 · live tasks
#
# ### Task 1 · "This model won't export"
#
# The speech team's front-end. Read it as you would in an interview: which lines will trouble `torch.export`,
# and are they part of what the model computes?

# %%
show_source(FrameNormalizer)

# %% [markdown]
# Your tool is the export doctor: it reads the error the way lesson 02 taught (kind, stage, line).

# %%
first_look = doctor.examine(FrameNormalizer(), (torch.randn(4, 16, generator=g),), target="FrameNormalizer")
print(doctor.to_text(first_look))

# %% [markdown]
# Fix it in the cell below. The check exports, lowers and runs your model, and compares it with the
# original `FrameNormalizer` in eager mode on quiet frames, loud frames and silence.

# %%
# ✏️ Exercise 12.wont_export — edit this cell, then run the check below.
class FrameNormalizerForExport(FrameNormalizer):
    def forward(self, x):
        assert not torch.isnan(x).any(), "NaN from the microphone"
        h = self.enc(x)
        peak = h.abs().max()
        if peak > 1.0:
            h = h / peak
        return self.dec(h)


answer = FrameNormalizerForExport()

# %%
task1 = session.record(exercises.check("12.wont_export", answer))

# %% [markdown]
# ### Task 2 · "The `.pte` disagrees with eager on the phone"
#
# A classifier whose tests (and export) use batches of 8, with a batch `Dim` from 1 to 8 so the phone can send
# fewer. The phone sends one sample at a time.

# %%
show_source(BatchStatsClassifier)

# %% [markdown]
# The bug report, reproduced: the shipped program against eager PyTorch on what the test suite sends and on
# what the phone sends.

# %%
classifier = BatchStatsClassifier()
shipped = shipped_batch_program()
print(shipped.input_contract())
for n in (8, 1):
    row = helpers.check_one(classifier, shipped, (torch.randn(n, 6, generator=g),))
    print(f"batch {n}: {row.describe()}")

# %% [markdown]
# Ship something the phone can call. Your answer is the program's methods and the app's `pick(x)`, which
# chooses the method for each call (lesson 05's hoisting, on a size this time). The check runs every batch
# from 1 to 8 through your `pick` and the methods you export, against the original in eager mode, and reads how
# many samples each method plans memory for (8 at most: the app never sends more).

# %%
# ✏️ Exercise 12.phone_disagrees — edit this cell, then run the check below.
model = BatchStatsClassifier()
methods = {
    "forward": (model, (torch.randn(8, 6),), {"x": {0: Dim("batch", min=1, max=8)}}),  # what was shipped
}


def pick(x):
    return "forward"


answer = (methods, pick)

# %%
task2 = session.record(exercises.check("12.phone_disagrees", answer))

# %% [markdown]
# ### Task 3 · "The runtime rejects our camera frames"
#
# A road-sign reader exported from the training notebook's crops. The app hands it the camera's frames.

# %%
show_source(GlyphNet)

# %%
signs = glyph_program()
frame = torch.rand(1, 3, 120, 160, generator=g)  # one 4:3 frame from the fleet's cameras (scaled down)
err = helpers.show_error(signs.run_raw, frame)

# %% [markdown]
# Write the host step that every frame goes through before the model. The check sends five camera
# resolutions (landscape, portrait, square) through your `prepare` and the shipped program, and checks that
# the model sees the whole frame, undistorted.

# %%
# ✏️ Exercise 12.camera_rejected — edit this cell, then run the check below.
def prepare(frame):
    return frame


answer = prepare

# %%
task3 = session.record(exercises.check("12.camera_rejected", answer))

# %% [markdown]
# ## Part 3 · summary
#
# Run this cell when you are done (run it again after more answers or tasks): your score per topic, the
# live tasks, and the lessons to revisit.

# %%
session.summary()

# %% [markdown]
# ## Next
#
# - `make cards` prints every interview card (question, 30-second answer, the points an interviewer listens
#   for, the lesson to revisit) on one page: `build/interview-cards.html`.
# - Press *Reshuffle* to take the questions in another order; every lesson also ends with its own interview question.
