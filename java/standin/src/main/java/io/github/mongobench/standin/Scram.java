package io.github.mongobench.standin;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Base64;
import javax.crypto.Mac;
import javax.crypto.SecretKeyFactory;
import javax.crypto.spec.PBEKeySpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * Server side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as MongoDB runs it over saslStart and
 * saslContinue: the password is SASLprep'd (not MD5-digested as for SCRAM-SHA-1), no channel
 * binding, and with {@code options: {skipEmptyExchange: true}} the conversation ends with the
 * server-final message instead of an extra empty round trip.
 */
final class Scram {

  static final String MECHANISM = "SCRAM-SHA-256";
  private static final String HMAC = "HmacSHA256";
  private static final SecureRandom RANDOM = new SecureRandom();
  private static final Base64.Encoder B64 = Base64.getEncoder();
  private static final Base64.Decoder B64D = Base64.getDecoder();

  private Scram() {}

  /** A failed SASL step, as a MongoDB error code and message. */
  static final class SaslException extends Exception {
    private static final long serialVersionUID = 1L;
    final int code;
    final String codeName;

    SaslException(int code, String codeName, String message) {
      super(message, null, false, false);
      this.code = code;
      this.codeName = codeName;
    }

    static SaslException authFailed() {
      return new SaslException(18, "AuthenticationFailed", "Authentication failed.");
    }

    static SaslException protocol(String message) {
      return new SaslException(17, "ProtocolError", message);
    }
  }

  /** One conversation of one connection, from client-first to server-final. */
  static final class Conversation {
    final Users.User user;
    private final String gs2Header;
    private final String clientFirstBare;
    private final String serverFirst;
    private final String nonce;
    private final boolean skipEmptyExchange;
    private boolean serverFinalSent;
    private boolean done;

    private Conversation(
        Users.User user,
        String gs2Header,
        String clientFirstBare,
        String nonce,
        boolean skipEmptyExchange) {
      this.user = user;
      this.gs2Header = gs2Header;
      this.clientFirstBare = clientFirstBare;
      this.nonce = nonce;
      this.skipEmptyExchange = skipEmptyExchange;
      this.serverFirst =
          "r=" + nonce + ",s=" + B64.encodeToString(user.salt()) + ",i=" + user.iterations();
    }

    /** Parses client-first ("n,,n=user,r=nonce") and looks the user up in {@code db}. */
    static Conversation start(Users users, String db, byte[] clientFirst, boolean skipEmptyExchange)
        throws SaslException {
      String msg = new String(clientFirst, StandardCharsets.UTF_8);
      int first = msg.indexOf(',');
      int second = first < 0 ? -1 : msg.indexOf(',', first + 1);
      if (second < 0) {
        throw SaslException.protocol("SCRAM client-first message has no GS2 header");
      }
      String cbind = msg.substring(0, first);
      if (!cbind.equals("n") && !cbind.equals("y")) {
        throw SaslException.protocol("SCRAM channel binding is not supported");
      }
      if (second != first + 1) {
        throw SaslException.protocol("SCRAM authorization identities are not supported");
      }
      String bare = msg.substring(second + 1);
      String[] attrs = bare.split(",", -1);
      if (attrs.length < 2 || !attrs[0].startsWith("n=") || !attrs[1].startsWith("r=")) {
        throw SaslException.protocol("malformed SCRAM client-first message");
      }
      String name = decodeName(attrs[0].substring(2));
      String clientNonce = attrs[1].substring(2);
      if (clientNonce.isEmpty()) {
        throw SaslException.protocol("SCRAM client nonce is empty");
      }
      Users.User user = users.get(db, name);
      if (user == null) {
        throw SaslException.authFailed();
      }
      byte[] serverNonce = new byte[24];
      RANDOM.nextBytes(serverNonce);
      return new Conversation(
          user,
          msg.substring(0, second + 1),
          bare,
          clientNonce + B64.encodeToString(serverNonce),
          skipEmptyExchange);
    }

    byte[] serverFirstMessage() {
      return serverFirst.getBytes(StandardCharsets.UTF_8);
    }

    boolean done() {
      return done;
    }

    /** The server's answer to the client's next message; done() tells whether it was the last. */
    byte[] next(byte[] clientMessage) throws SaslException {
      if (done) {
        throw SaslException.protocol("SASL conversation already complete");
      }
      if (serverFinalSent) { // the empty exchange of clients without skipEmptyExchange
        if (clientMessage.length != 0) {
          throw SaslException.protocol("expected an empty SCRAM message");
        }
        done = true;
        return new byte[0];
      }
      String msg = new String(clientMessage, StandardCharsets.UTF_8);
      int p = msg.lastIndexOf(",p=");
      if (p < 0) {
        throw SaslException.protocol("SCRAM client-final message has no proof");
      }
      String withoutProof = msg.substring(0, p);
      String[] attrs = withoutProof.split(",", -1);
      if (attrs.length < 2 || !attrs[0].startsWith("c=") || !attrs[1].startsWith("r=")) {
        throw SaslException.protocol("malformed SCRAM client-final message");
      }
      String expectedBinding = B64.encodeToString(gs2Header.getBytes(StandardCharsets.UTF_8));
      if (!attrs[0].substring(2).equals(expectedBinding)) {
        throw SaslException.protocol("SCRAM channel binding does not match the GS2 header");
      }
      if (!attrs[1].substring(2).equals(nonce)) {
        throw SaslException.protocol("SCRAM nonce mismatch");
      }
      byte[] proof;
      try {
        proof = B64D.decode(msg.substring(p + 3));
      } catch (IllegalArgumentException e) {
        throw SaslException.protocol("SCRAM proof is not base64");
      }
      byte[] authMessage =
          (clientFirstBare + "," + serverFirst + "," + withoutProof)
              .getBytes(StandardCharsets.UTF_8);
      byte[] clientSignature = hmac(user.storedKey(), authMessage);
      if (proof.length != clientSignature.length) {
        throw SaslException.authFailed();
      }
      byte[] clientKey = new byte[proof.length];
      for (int i = 0; i < proof.length; i++) {
        clientKey[i] = (byte) (proof[i] ^ clientSignature[i]);
      }
      if (!MessageDigest.isEqual(sha256(clientKey), user.storedKey())) {
        throw SaslException.authFailed();
      }
      byte[] serverSignature = hmac(user.serverKey(), authMessage);
      serverFinalSent = true;
      done = skipEmptyExchange;
      return ("v=" + B64.encodeToString(serverSignature)).getBytes(StandardCharsets.UTF_8);
    }
  }

  // RFC 5802 section 5.1: ',' and '=' in user names are sent as "=2C" and "=3D".
  private static String decodeName(String encoded) throws SaslException {
    StringBuilder sb = new StringBuilder(encoded.length());
    for (int i = 0; i < encoded.length(); i++) {
      char c = encoded.charAt(i);
      if (c != '=') {
        sb.append(c);
      } else if (encoded.startsWith("=2C", i)) {
        sb.append(',');
        i += 2;
      } else if (encoded.startsWith("=3D", i)) {
        sb.append('=');
        i += 2;
      } else {
        throw SaslException.protocol("malformed user name in SCRAM message");
      }
    }
    return sb.toString();
  }

  /** PBKDF2-HMAC-SHA-256, 32 bytes, over the password's UTF-8 bytes (the JDK's encoding). */
  static byte[] saltedPassword(String preparedPassword, byte[] salt, int iterations) {
    PBEKeySpec spec = new PBEKeySpec(preparedPassword.toCharArray(), salt, iterations, 256);
    try {
      return SecretKeyFactory.getInstance("PBKDF2WithHmacSHA256").generateSecret(spec).getEncoded();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("PBKDF2WithHmacSHA256 unavailable", e);
    } finally {
      spec.clearPassword();
    }
  }

  static byte[] hmac(byte[] key, String message) {
    return hmac(key, message.getBytes(StandardCharsets.UTF_8));
  }

  static byte[] hmac(byte[] key, byte[] message) {
    try {
      Mac mac = Mac.getInstance(HMAC);
      mac.init(new SecretKeySpec(key, HMAC));
      return mac.doFinal(message);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 unavailable", e);
    }
  }

  static byte[] sha256(byte[] data) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(data);
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("SHA-256 unavailable", e);
    }
  }
}
