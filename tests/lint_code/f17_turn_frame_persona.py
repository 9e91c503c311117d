# promptkit's turn_frame: the persona card carries the time (it is placed before the history).
# expect: clock @8 the persona card (turn_frame persona=)
import time

from promptkit.assembly import turn_frame

PERSONA = "你是 Aalis，一个友好的群聊助手。"
clock = time.strftime("%H:%M")  # @8


def frame(history, current):
    return turn_frame(history, persona=PERSONA + f" 现在是 {clock}。", current=current)
