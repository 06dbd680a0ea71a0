import { describe, expect, it } from "vitest";
import { normalizeMath, splitBlocks } from "./Markdown";

describe("normalizeMath", () => {
  it("turns bracket and parenthesis maths into dollars", () => {
    expect(normalizeMath("so \\[ 17 \\times 23 \\] and \\(x^2\\)")).toBe("so \n\n$$\n17 \\times 23\n$$\n\n and $x^2$");
  });
  it("leaves code alone", () => {
    const code = "```\nprint('\\[not maths\\]')\n```";
    expect(normalizeMath(code)).toBe(code);
    expect(normalizeMath("`\\(x\\)` but \\(y\\)")).toBe("`\\(x\\)` but $y$");
  });
});

describe("splitBlocks", () => {
  it("cuts at blank lines, keeping fenced code and display maths whole", () => {
    const text = ["Intro line", "", "```python", "a = 1", "", "b = 2", "```", "", "$$", "x", "", "y", "$$", "", "| a |", "|---|", "| 1 |"].join("\n");
    expect(splitBlocks(text)).toEqual([
      "Intro line",
      "```python\na = 1\n\nb = 2\n```",
      "$$\nx\n\ny\n$$",
      "| a |\n|---|\n| 1 |",
    ]);
  });
  it("keeps an unfinished block, as while streaming, and gives back the text's words", () => {
    const text = "one\n\ntwo\n\n```\nstill open\n\nmore";
    const blocks = splitBlocks(text);
    expect(blocks).toEqual(["one", "two", "```\nstill open\n\nmore"]);
    expect(splitBlocks("")).toEqual([""]);
  });
});
