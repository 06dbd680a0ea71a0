import { describe, expect, it } from "vitest";
import { normalizeMath } from "./Markdown";

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
