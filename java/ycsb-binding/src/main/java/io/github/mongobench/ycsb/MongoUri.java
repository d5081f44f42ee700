package io.github.mongobench.ycsb;

import java.io.IOException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import site.ycsb.DBException;

/** Resolves the connection string from YCSB properties and keeps its password out of messages. */
final class MongoUri {

  static final String URL_PROPERTY = "mongodb.url";
  static final String URL_FILE_PROPERTY = "mongodb.urlfile";
  static final String DEFAULT_URL = "mongodb://localhost:27017/ycsb?w=1";
  static final String DEFAULT_DATABASE = "ycsb";

  private final String uri;
  private final String password;

  private MongoUri(String uri) {
    this.uri = uri;
    this.password = extractPassword(uri);
  }

  /**
   * The file named by {@code mongodb.urlfile} wins over {@code mongodb.url}, so that a URI with
   * credentials never has to appear on a command line or in a process listing.
   */
  static MongoUri fromProperties(Properties props) throws DBException {
    String file = props.getProperty(URL_FILE_PROPERTY);
    String value;
    if (file != null && !file.isBlank()) {
      try {
        value = Files.readString(Path.of(file.trim()), StandardCharsets.UTF_8).trim();
      } catch (IOException e) {
        throw new DBException("cannot read " + URL_FILE_PROPERTY + " '" + file + "': " + e);
      }
      if (value.isEmpty()) {
        throw new DBException(URL_FILE_PROPERTY + " '" + file + "' is empty");
      }
    } else {
      value = props.getProperty(URL_PROPERTY, DEFAULT_URL).trim();
    }
    MongoUri result = new MongoUri(value);
    if (!value.startsWith("mongodb://") && !value.startsWith("mongodb+srv://")) {
      throw new DBException("connection string must start with mongodb:// or mongodb+srv://, got "
          + result.redacted());
    }
    return result;
  }

  String value() {
    return uri;
  }

  /** The URI with {@code user:pass@} shown as {@code user:***@}. */
  String redacted() {
    int start = uri.indexOf("://");
    int at = userInfoEnd(uri);
    if (start < 0 || at < 0) {
      return uri;
    }
    int colon = uri.indexOf(':', start + 3);
    if (colon < 0 || colon > at) {
      return uri;
    }
    return uri.substring(0, colon + 1) + "***" + uri.substring(at);
  }

  /** Scrubs the password, raw and URL-decoded, from any text such as a driver error message. */
  String scrub(String text) {
    if (text == null || password == null || password.isEmpty()) {
      return text;
    }
    String out = text.replace(uri, redacted()).replace(password, "***");
    String decoded = decode(password);
    return decoded.isEmpty() ? out : out.replace(decoded, "***");
  }

  /**
   * Index of the '@' closing the user info, or -1. The last '@' is taken: a mistyped password may
   * hold '@', '/' or '?' unencoded, and hiding too much beats printing part of a secret.
   */
  private static int userInfoEnd(String s) {
    int start = s.indexOf("://");
    int at = s.lastIndexOf('@');
    return start >= 0 && at > start ? at : -1;
  }

  private static String extractPassword(String s) {
    int start = s.indexOf("://");
    int at = userInfoEnd(s);
    if (at < 0) {
      return null;
    }
    int colon = s.indexOf(':', start + 3);
    return colon < 0 || colon > at ? null : s.substring(colon + 1, at);
  }

  private static String decode(String s) {
    try {
      return URLDecoder.decode(s, StandardCharsets.UTF_8);
    } catch (IllegalArgumentException e) {
      return s;
    }
  }
}
