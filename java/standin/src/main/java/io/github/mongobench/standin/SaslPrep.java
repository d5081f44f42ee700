package io.github.mongobench.standin;

import java.text.Normalizer;

/**
 * SASLprep (RFC 4013, the stringprep profile of RFC 3454) for SCRAM-SHA-256 passwords, which
 * MongoDB and its drivers prepare this way before hashing.
 *
 * <p>Maps "commonly mapped to nothing" characters (B.1) away and non-ASCII spaces (C.1.2) to
 * U+0020, normalizes to NFKC, then rejects the prohibited characters and bidi violations. Unlike
 * drivers it does not reject code points unassigned in Unicode 3.2 ("stored strings" vs "queries"
 * differ only there): a client that refuses such a password never gets to the server anyway.
 */
final class SaslPrep {

  private SaslPrep() {}

  /** The prepared string; IllegalArgumentException (never quoting the input) when prohibited. */
  static String prepare(String input) {
    StringBuilder mapped = new StringBuilder(input.length());
    input
        .codePoints()
        .forEach(
            cp -> {
              if (mappedToNothing(cp)) {
                return;
              }
              mapped.appendCodePoint(nonAsciiSpace(cp) ? ' ' : cp);
            });
    String normalized = Normalizer.normalize(mapped, Normalizer.Form.NFKC);
    boolean hasRandAL = false;
    boolean hasL = false;
    int[] cps = normalized.codePoints().toArray();
    for (int i = 0; i < cps.length; i++) {
      int cp = cps[i];
      if (prohibited(cp)) {
        // No code point or position in the message: the input is a password.
        throw new IllegalArgumentException("contains a character SASLprep prohibits");
      }
      byte dir = Character.getDirectionality(cp);
      hasRandAL |=
          dir == Character.DIRECTIONALITY_RIGHT_TO_LEFT
              || dir == Character.DIRECTIONALITY_RIGHT_TO_LEFT_ARABIC;
      hasL |= dir == Character.DIRECTIONALITY_LEFT_TO_RIGHT;
    }
    if (hasRandAL) {
      // RFC 3454 section 6: right-to-left text must not mix with left-to-right text and must
      // start and end with a right-to-left character.
      if (hasL || !isRandAL(cps[0]) || !isRandAL(cps[cps.length - 1])) {
        throw new IllegalArgumentException("mixes right-to-left and left-to-right text");
      }
    }
    return normalized;
  }

  private static boolean isRandAL(int cp) {
    byte dir = Character.getDirectionality(cp);
    return dir == Character.DIRECTIONALITY_RIGHT_TO_LEFT
        || dir == Character.DIRECTIONALITY_RIGHT_TO_LEFT_ARABIC;
  }

  // RFC 3454 table B.1
  private static boolean mappedToNothing(int cp) {
    return cp == 0x00AD
        || cp == 0x034F
        || cp == 0x1806
        || (cp >= 0x180B && cp <= 0x180D)
        || (cp >= 0x200B && cp <= 0x200D)
        || cp == 0x2060
        || (cp >= 0xFE00 && cp <= 0xFE0F)
        || cp == 0xFEFF;
  }

  // RFC 3454 table C.1.2
  private static boolean nonAsciiSpace(int cp) {
    return cp == 0x00A0
        || cp == 0x1680
        || (cp >= 0x2000 && cp <= 0x200B)
        || cp == 0x202F
        || cp == 0x205F
        || cp == 0x3000;
  }

  // RFC 4013 section 2.3: tables C.1.2, C.2.1, C.2.2, C.3, C.4, C.5, C.6, C.7, C.8, C.9
  private static boolean prohibited(int cp) {
    return nonAsciiSpace(cp)
        || cp <= 0x001F
        || cp == 0x007F // C.2.1
        || (cp >= 0x0080 && cp <= 0x009F)
        || cp == 0x06DD
        || cp == 0x070F
        || cp == 0x180E
        || cp == 0x200C
        || cp == 0x200D
        || cp == 0x2028
        || cp == 0x2029
        || (cp >= 0x2060 && cp <= 0x2063)
        || (cp >= 0x206A && cp <= 0x206F)
        || cp == 0xFEFF
        || (cp >= 0xFFF9 && cp <= 0xFFFC)
        || (cp >= 0x1D173 && cp <= 0x1D17A) // C.2.2
        || (cp >= 0xE000 && cp <= 0xF8FF)
        || (cp >= 0xF0000 && cp <= 0xFFFFD)
        || (cp >= 0x100000 && cp <= 0x10FFFD) // C.3
        || (cp >= 0xFDD0 && cp <= 0xFDEF)
        || (cp & 0xFFFE) == 0xFFFE // C.4: U+nFFFE and U+nFFFF
        || (cp >= 0xD800 && cp <= 0xDFFF) // C.5 (lone surrogates)
        || (cp >= 0xFFF9 && cp <= 0xFFFD) // C.6
        || (cp >= 0x2FF0 && cp <= 0x2FFB) // C.7
        || cp == 0x0340
        || cp == 0x0341
        || cp == 0x200E
        || cp == 0x200F
        || (cp >= 0x202A && cp <= 0x202E) // C.8
        || cp == 0xE0001
        || (cp >= 0xE0020 && cp <= 0xE007F); // C.9
  }
}
